"""The transformations and predicates Conveyor ships, by Kafka Connect class name and alias.

Aliases are the class names without the package: ``InsertField$Value``,
``RegexRouter``, ``TopicNameMatches``.
"""

from __future__ import annotations

from conveyor.api.transforms import Predicate, Transformation
from conveyor.transforms.cast import CastKey, CastValue
from conveyor.transforms.extract_field import ExtractFieldKey, ExtractFieldValue
from conveyor.transforms.filter import Filter
from conveyor.transforms.flatten import FlattenKey, FlattenValue
from conveyor.transforms.header_from import HeaderFromKey, HeaderFromValue
from conveyor.transforms.headers import DropHeaders, InsertHeader
from conveyor.transforms.hoist_field import HoistFieldKey, HoistFieldValue
from conveyor.transforms.insert_field import InsertFieldKey, InsertFieldValue
from conveyor.transforms.mask_field import MaskFieldKey, MaskFieldValue
from conveyor.transforms.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from conveyor.transforms.regex_router import RegexRouter
from conveyor.transforms.replace_field import ReplaceFieldKey, ReplaceFieldValue
from conveyor.transforms.set_schema_metadata import SetSchemaMetadataKey, SetSchemaMetadataValue
from conveyor.transforms.timestamp_converter import TimestampConverterKey, TimestampConverterValue
from conveyor.transforms.timestamp_router import TimestampRouter
from conveyor.transforms.value_to_key import ValueToKey

TRANSFORMS_PACKAGE = "org.apache.kafka.connect.transforms."
PREDICATES_PACKAGE = "org.apache.kafka.connect.transforms.predicates."

_TRANSFORMATION_CLASSES: tuple[type[Transformation], ...] = (  # type: ignore[type-arg]
    InsertFieldKey,
    InsertFieldValue,
    ReplaceFieldKey,
    ReplaceFieldValue,
    ExtractFieldKey,
    ExtractFieldValue,
    HoistFieldKey,
    HoistFieldValue,
    CastKey,
    CastValue,
    ValueToKey,
    TimestampRouter,
    RegexRouter,
    Filter,
    FlattenKey,
    FlattenValue,
    MaskFieldKey,
    MaskFieldValue,
    SetSchemaMetadataKey,
    SetSchemaMetadataValue,
    DropHeaders,
    InsertHeader,
    HeaderFromKey,
    HeaderFromValue,
    TimestampConverterKey,
    TimestampConverterValue,
)
_PREDICATE_CLASSES: tuple[type[Predicate], ...] = (TopicNameMatches, HasHeaderKey, RecordIsTombstone)  # type: ignore[type-arg]


def _registry(classes: tuple[type, ...], package: str) -> dict[str, type]:
    names: dict[str, type] = {}
    for cls in classes:
        full = cls.kafka_class_name  # type: ignore[attr-defined]
        names[full] = cls
        names[full[len(package) :]] = cls
    return names


#: Kafka Connect class names and aliases → transformation classes.
TRANSFORMATIONS: dict[str, type[Transformation]] = _registry(_TRANSFORMATION_CLASSES, TRANSFORMS_PACKAGE)  # type: ignore[type-arg]
#: Kafka Connect class names and aliases → predicate classes.
PREDICATES: dict[str, type[Predicate]] = _registry(_PREDICATE_CLASSES, PREDICATES_PACKAGE)  # type: ignore[type-arg]


def reported_class_name(obj: object) -> str:
    """The class named in error reports: Kafka Connect's class name for the built-in
    transformations and predicates, ``module.QualName`` for others."""
    cls = obj if isinstance(obj, type) else type(obj)
    name = cls.__dict__.get("kafka_class_name")  # a user subclass reports its own name
    if isinstance(name, str) and name:
        return name
    return f"{cls.__module__}.{cls.__qualname__}"
