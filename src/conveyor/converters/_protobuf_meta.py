"""The ``.proto`` files Confluent's schemas import without references (the well-known types,
``confluent/type/decimal.proto``, ``confluent/meta.proto``), and Confluent's
``(confluent.field_meta).params`` field options, written and read without generated code."""

from __future__ import annotations

import importlib
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor

DECIMAL_FILE = "confluent/type/decimal.proto"
META_FILE = "confluent/meta.proto"
FIELD_META_NUMBER = 1088  # extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
_F = descriptor_pb2.FieldDescriptorProto


def decimal_file() -> descriptor_pb2.FileDescriptorProto:
    """``confluent/type/decimal.proto`` as Confluent ships it."""
    fdp = descriptor_pb2.FileDescriptorProto(name=DECIMAL_FILE, package="confluent.type", syntax="proto3")
    msg = fdp.message_type.add(name="Decimal")
    for name, number, typ in (("value", 1, _F.TYPE_BYTES), ("precision", 2, _F.TYPE_UINT32),
                              ("scale", 3, _F.TYPE_INT32)):
        msg.field.add(name=name, number=number, type=typ, label=_F.LABEL_OPTIONAL)
    return fdp


def meta_file() -> descriptor_pb2.FileDescriptorProto:
    """``confluent/meta.proto``: ``Meta {doc; map<string,string> params; repeated tags}`` and its
    ``field_meta``/``message_meta``/``file_meta`` option extensions (number 1088)."""
    fdp = descriptor_pb2.FileDescriptorProto(name=META_FILE, package="confluent", syntax="proto3",
                                             dependency=["google/protobuf/descriptor.proto"])
    meta = fdp.message_type.add(name="Meta")
    meta.field.add(name="doc", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    meta.field.add(name="params", number=2, type=_F.TYPE_MESSAGE, label=_F.LABEL_REPEATED,
                   type_name=".confluent.Meta.ParamsEntry")
    meta.field.add(name="tags", number=3, type=_F.TYPE_STRING, label=_F.LABEL_REPEATED)
    entry = meta.nested_type.add(name="ParamsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    for name, extendee in (("file_meta", "FileOptions"), ("message_meta", "MessageOptions"),
                           ("field_meta", "FieldOptions"), ("enum_meta", "EnumOptions"),
                           ("enum_value_meta", "EnumValueOptions")):
        fdp.extension.add(name=name, number=FIELD_META_NUMBER, type=_F.TYPE_MESSAGE, label=_F.LABEL_OPTIONAL,
                          type_name=".confluent.Meta", extendee=f".google.protobuf.{extendee}")
    return fdp


# In dependency order; google.type modules come from googleapis-common-protos (a dependency of
# confluent-kafka[protobuf]) and are skipped when missing.
_WELL_KNOWN_MODULES = (
    "google.protobuf.descriptor_pb2", "google.protobuf.any_pb2", "google.protobuf.source_context_pb2",
    "google.protobuf.type_pb2", "google.protobuf.api_pb2", "google.protobuf.duration_pb2",
    "google.protobuf.empty_pb2", "google.protobuf.field_mask_pb2", "google.protobuf.struct_pb2",
    "google.protobuf.timestamp_pb2", "google.protobuf.wrappers_pb2", "google.type.date_pb2",
    "google.type.timeofday_pb2", "google.type.dayofweek_pb2", "google.type.datetime_pb2", "google.type.latlng_pb2",
    "google.type.money_pb2", "google.type.month_pb2", "google.type.color_pb2", "google.type.fraction_pb2",
    "google.type.calendar_period_pb2", "google.type.expr_pb2", "google.type.postal_address_pb2",
    "google.type.quaternion_pb2",
)


def well_known_files() -> tuple[bytes, ...]:
    """The serialized files every descriptor pool holds (:func:`conveyor.converters._protobuf_data.new_pool`),
    in dependency order: the well-known types there are, then Confluent's decimal and meta files."""
    files = []
    for name in _WELL_KNOWN_MODULES:
        try:
            files.append(importlib.import_module(name).DESCRIPTOR.serialized_pb)
        except ImportError:
            continue
    return (*files, decimal_file().SerializeToString(), meta_file().SerializeToString())


def meta_options(params: dict[str, str]) -> bytes:
    """``FieldOptions`` bytes holding ``(confluent.field_meta).params``, hand-encoded: the
    extension field 1088 (length-delimited) containing ``Meta.params`` entries (field 2)."""
    meta = b""
    for key, value in params.items():
        entry = _len_field(1, key.encode()) + _len_field(2, value.encode())
        meta += _len_field(2, entry)
    return _len_field(FIELD_META_NUMBER, meta)


def _len_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_meta_params(pool: descriptor_pool.DescriptorPool, fd: FieldDescriptor) -> dict[str, str]:
    """The ``(confluent.field_meta).params`` of a field, or ``{}``."""
    if not fd.has_options:
        return {}
    view = _meta_view_class(pool)()
    try:
        view.ParseFromString(fd.GetOptions().SerializeToString())
    except Exception:  # noqa: BLE001 - options that do not parse as Meta: no hints
        return {}
    return dict(view.field_meta.params)


_META_VIEW = "conveyor/meta_view.proto"


def _meta_view_class(pool: descriptor_pool.DescriptorPool) -> Any:
    try:
        desc = pool.FindMessageTypeByName("conveyor.internal.MetaView")
    except KeyError:
        fdp = descriptor_pb2.FileDescriptorProto(name=_META_VIEW, package="conveyor.internal", syntax="proto3",
                                                 dependency=[META_FILE])
        msg = fdp.message_type.add(name="MetaView")
        msg.field.add(name="field_meta", number=FIELD_META_NUMBER, type=_F.TYPE_MESSAGE, label=_F.LABEL_OPTIONAL,
                      type_name=".confluent.Meta")
        pool.Add(fdp)
        desc = pool.FindMessageTypeByName("conveyor.internal.MetaView")
    return message_factory.GetMessageClass(desc)
