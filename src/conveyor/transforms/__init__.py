"""Single message transformations and predicates, configured with Kafka Connect's keys.

==========================================================================  ========================================
Kafka Connect class (alias = the part after the last package dot)           Conveyor class
==========================================================================  ========================================
``org.apache.kafka.connect.transforms.InsertField$Key`` / ``$Value``        :class:`InsertFieldKey` / ``...Value``
``org.apache.kafka.connect.transforms.ReplaceField$Key`` / ``$Value``       :class:`ReplaceFieldKey` / ``...Value``
``org.apache.kafka.connect.transforms.ExtractField$Key`` / ``$Value``       :class:`ExtractFieldKey` / ``...Value``
``org.apache.kafka.connect.transforms.HoistField$Key`` / ``$Value``         :class:`HoistFieldKey` / ``...Value``
``org.apache.kafka.connect.transforms.Cast$Key`` / ``$Value``               :class:`CastKey` / :class:`CastValue`
``org.apache.kafka.connect.transforms.ValueToKey``                          :class:`ValueToKey`
``org.apache.kafka.connect.transforms.TimestampRouter``                     :class:`TimestampRouter`
``org.apache.kafka.connect.transforms.RegexRouter``                         :class:`RegexRouter`
``org.apache.kafka.connect.transforms.Filter``                              :class:`Filter`
``org.apache.kafka.connect.transforms.Flatten$Key`` / ``$Value``            :class:`FlattenKey` / ``...Value``
``org.apache.kafka.connect.transforms.MaskField$Key`` / ``$Value``          :class:`MaskFieldKey` / ``...Value``
``org.apache.kafka.connect.transforms.SetSchemaMetadata$Key`` / ``$Value``  :class:`SetSchemaMetadataKey` / ``...``
``org.apache.kafka.connect.transforms.DropHeaders``                         :class:`DropHeaders`
``org.apache.kafka.connect.transforms.InsertHeader``                        :class:`InsertHeader`
``org.apache.kafka.connect.transforms.predicates.TopicNameMatches``         :class:`TopicNameMatches`
``org.apache.kafka.connect.transforms.predicates.HasHeaderKey``             :class:`HasHeaderKey`
``org.apache.kafka.connect.transforms.predicates.RecordIsTombstone``        :class:`RecordIsTombstone`
==========================================================================  ========================================

:class:`TransformationChain` (in :mod:`conveyor.transforms.chain`) builds a connector's
chain from its configuration.
"""

from __future__ import annotations

from conveyor.transforms._registry import PREDICATES, TRANSFORMATIONS, reported_class_name
from conveyor.transforms.cast import Cast, CastKey, CastValue
from conveyor.transforms.chain import (
    TransformationChain,
    TransformationError,
    TransformationStage,
    predicate_class,
    transformation_class,
)
from conveyor.transforms.extract_field import ExtractField, ExtractFieldKey, ExtractFieldValue
from conveyor.transforms.filter import Filter
from conveyor.transforms.flatten import Flatten, FlattenKey, FlattenValue
from conveyor.transforms.headers import DropHeaders, InsertHeader
from conveyor.transforms.hoist_field import HoistField, HoistFieldKey, HoistFieldValue
from conveyor.transforms.insert_field import InsertField, InsertFieldKey, InsertFieldValue
from conveyor.transforms.mask_field import MaskField, MaskFieldKey, MaskFieldValue
from conveyor.transforms.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from conveyor.transforms.regex_router import RegexRouter
from conveyor.transforms.replace_field import ReplaceField, ReplaceFieldKey, ReplaceFieldValue
from conveyor.transforms.set_schema_metadata import SetSchemaMetadata, SetSchemaMetadataKey, SetSchemaMetadataValue
from conveyor.transforms.timestamp_router import TimestampRouter
from conveyor.transforms.value_to_key import ValueToKey

__all__ = [
    "PREDICATES",
    "TRANSFORMATIONS",
    "Cast",
    "CastKey",
    "CastValue",
    "DropHeaders",
    "ExtractField",
    "ExtractFieldKey",
    "ExtractFieldValue",
    "Filter",
    "Flatten",
    "FlattenKey",
    "FlattenValue",
    "HasHeaderKey",
    "HoistField",
    "HoistFieldKey",
    "HoistFieldValue",
    "InsertField",
    "InsertFieldKey",
    "InsertFieldValue",
    "InsertHeader",
    "MaskField",
    "MaskFieldKey",
    "MaskFieldValue",
    "RecordIsTombstone",
    "RegexRouter",
    "ReplaceField",
    "ReplaceFieldKey",
    "ReplaceFieldValue",
    "SetSchemaMetadata",
    "SetSchemaMetadataKey",
    "SetSchemaMetadataValue",
    "TimestampRouter",
    "TopicNameMatches",
    "TransformationChain",
    "TransformationError",
    "TransformationStage",
    "ValueToKey",
    "predicate_class",
    "reported_class_name",
    "transformation_class",
]
