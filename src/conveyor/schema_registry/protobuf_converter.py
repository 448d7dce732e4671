"""``ProtobufConverter``: protobuf in Confluent's wire format, schemas in a Schema Registry.

Kafka Connect: ``io.confluent.connect.protobuf.ProtobufConverter`` (alias ``protobuf``).

Bytes are Confluent's framing: magic byte 0, 4-byte big-endian schema id, the message-index
path (zig-zag varints; a single ``0`` for the first top-level message), the protobuf bytes.
Writing builds a proto3 file from the Connect schema as Confluent's ``ProtobufData`` does
(:mod:`conveyor.converters._protobuf_data`), makes its message class (cached per Connect
schema), fills it from the Connect value and hands it to
``confluent_kafka.schema_registry.protobuf.ProtobufSerializer`` (registration, subject name
strategies, ``use.latest.version``, framing). Reading fetches the writer schema by id, builds
its message classes (cached per schema id and message path), parses and maps the message to a
Connect ``struct``, so messages written by any protobuf producer read here, as in Kafka Connect.

Configuration: the shared Schema Registry keys (:mod:`conveyor.schema_registry._base`).

Writer schemas must come as a base64 serialized ``FileDescriptorProto`` (what
``format=serialized`` answers, and what confluent_kafka's serializer registers). A schema that
only reads back as ``.proto`` text (registered as text, on a registry without
``format=serialized``) is a ``DataError``: Python has no ``.proto`` parser short of ``protoc``.
Schema references (imports other than ``google/protobuf/*``, ``google/type/*``,
``confluent/*``) are fetched from their subjects and resolved.

Registry work-around (Apicurio, upstream Apicurio/apicurio-registry#7066): Apicurio 3.3.3
answers ``GET /schemas/ids/{id}?format=serialized`` (and the per-version equivalent) with HTTP
500. The converter's client (:class:`_SerializedFallbackClient`) asks with
``format=serialized`` first, as Confluent's clients do, and on a 5xx (or 400) asks again
without a format, and from then on (in this process) only without; Apicurio then returns the schema as stored,
which is the base64 descriptor when confluent_kafka registered it.

``None`` is a tombstone both ways. A value without a Connect schema, or whose schema is not a
``struct``, is a ``DataError`` (Confluent's ``ProtobufData`` only writes structs).

Not yet supported: ``oneof`` (Confluent's ``Union`` structs), the wrapper types as nullable
primitives (``wrapper.for.nullables``), ``optional.for.nullables``, ``int.for.enums``,
``enhanced.protobuf.schema.support``, ``scrub.invalid.names``, ``generate.index.for.unions``,
recursive messages, reading ``.proto`` text schemas, GUID framing (magic byte 1).

Neither the basic-auth secret nor the URLs appear in error messages.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from google.protobuf import descriptor_pb2, message_factory
from google.protobuf.message import DecodeError

from conveyor.api.errors import DataError
from conveyor.api.records import Header
from conveyor.api.schema import NULL, Schema, SchemaAndValue
from conveyor.converters import _protobuf_data
from conveyor.schema_registry._base import SchemaRegistryConverter

_BUILTIN_PREFIXES = ("google/protobuf/", "google/type/", "confluent/")
_SERIALIZED_REFUSED: set[str] = set()  # registry URLs that answered format=serialized with a 5xx


class _SerializedFallbackClient(SchemaRegistryClient):
    """A ``SchemaRegistryClient`` whose ``format=serialized`` requests fall back to no format.

    Apicurio 3.3.3 answers them with HTTP 500 for protobuf schemas (upstream
    Apicurio/apicurio-registry#7066) and 400 for Avro/JSON ones. On such an answer the request
    is made again without the format; after a 5xx, requests to those registry URLs no longer ask
    for it, in this process (each 5xx costs the client's retries with back-off: seconds)."""

    def __init__(self, conf: dict[str, Any]) -> None:
        super().__init__(conf)
        self._urls = str(conf.get("url", ""))

    def _fallback(self, call: Any, fmt: str | None) -> Any:
        if fmt == "serialized" and self._urls not in _SERIALIZED_REFUSED:
            try:
                return call("serialized")
            except SchemaRegistryError as exc:
                if exc.http_status_code != 400 and exc.http_status_code < 500:
                    raise
                if exc.http_status_code >= 500:
                    _SERIALIZED_REFUSED.add(self._urls)
            fmt = None
        return call(None if fmt == "serialized" else fmt)

    def get_schema(self, schema_id, subject_name=None, fmt=None, reference_format=None):  # type: ignore[no-untyped-def]
        return self._fallback(lambda f: super(_SerializedFallbackClient, self).get_schema(
            schema_id, subject_name, f, reference_format), fmt)

    def get_version(self, subject_name, version="latest", deleted=False, fmt=None):  # type: ignore[no-untyped-def]
        return self._fallback(lambda f: super(_SerializedFallbackClient, self).get_version(
            subject_name, version, deleted, f), fmt)

    def get_latest_version(self, subject_name, fmt=None):  # type: ignore[no-untyped-def]
        return self._fallback(lambda f: super(_SerializedFallbackClient, self).get_latest_version(subject_name, f), fmt)


class _Writer:
    """What writing values of one Connect schema needs: its message class and serializer."""

    __slots__ = ("message_class", "serializer")

    def __init__(self, message_class: Any, serializer: ProtobufSerializer) -> None:
        self.message_class = message_class
        self.serializer = serializer


class ProtobufConverter(SchemaRegistryConverter[_Writer]):
    """Confluent's ``ProtobufConverter`` through ``confluent_kafka.schema_registry``."""

    FORMAT = "Protobuf"

    def __init__(self) -> None:
        super().__init__()
        # (schema id, message-index path) -> (Connect schema, message class)
        self._readers: dict[tuple[int, tuple[int, ...]], tuple[Schema, Any]] = {}

    def _new_client(self, client_conf: dict[str, Any]) -> SchemaRegistryClient:
        return _SerializedFallbackClient(client_conf)

    # -- writing ----------------------------------------------------------------------------

    def from_connect_data(
        self, topic: str, headers: Sequence[Header], schema: Schema | None, value: Any
    ) -> bytes | None:
        """Connect ``struct`` value → Confluent-framed protobuf bytes (``None`` for ``None``).

        Raises:
            DataError: no schema or a non-struct schema, a value that does not fit the schema,
                or a registry failure (``Failed to serialize Protobuf data from topic ...``).
        """
        if value is None:
            return None
        if schema is None:
            raise DataError(
                f"ProtobufConverter cannot write a {type(value).__name__} value without a Connect schema; "
                "it writes struct schemas only"
            )
        writer = self._writer(schema)
        message = _protobuf_data.fill_message(writer.message_class(), schema, value)
        try:
            return writer.serializer(message, self._ctx(topic))
        except DataError:
            raise
        except Exception as exc:  # noqa: BLE001 - registry errors, protobuf's ValueError...
            raise self._failure("serialize", topic, exc) from None

    def _new_writer(self, schema: Schema) -> _Writer:
        client = self._require_client()
        fdp, full_name = _protobuf_data.to_file_proto(schema)
        message_class = _protobuf_data.message_class(_protobuf_data.new_pool(), fdp, full_name)
        conf = dict(self._serializer_conf, **{"use.deprecated.format": False})
        try:
            serializer = ProtobufSerializer(message_class, client, conf)
        except Exception as exc:  # noqa: BLE001 - confluent_kafka's ValueError/TypeError on bad settings
            raise DataError(f"cannot use the protobuf schema derived from the Connect schema: "
                            f"{type(exc).__name__}: {exc}") from None
        return _Writer(message_class, serializer)

    # -- reading ----------------------------------------------------------------------------

    def to_connect_data(self, topic: str, headers: Sequence[Header], data: bytes | None) -> SchemaAndValue:
        """Confluent-framed protobuf bytes → (Connect ``struct`` schema, ``dict`` value).

        Raises:
            DataError: a bad magic byte or truncated framing, a writer schema that is ``.proto``
                text or not protobuf, an unsupported message (``oneof``...), unparsable bytes or a
                registry failure (``Failed to deserialize Protobuf data from topic ...``).
        """
        if data is None:
            return NULL
        if len(data) < 6 or data[0] != 0:
            raise DataError(f"Failed to deserialize Protobuf data from topic {topic}: Unknown magic byte!")
        schema_id = int.from_bytes(data[1:5], "big")
        try:
            path, offset = _read_indexes(data, 5)
            reader = self._readers.get((schema_id, path))
            if reader is None:
                reader = self._new_reader(schema_id, path)
            schema, message_class = reader
            message = message_class.FromString(data[offset:])
        except DataError:
            raise
        except Exception as exc:  # noqa: BLE001 - registry errors, DecodeError, truncated payloads...
            raise self._failure("deserialize", topic, exc) from None
        return SchemaAndValue(schema, _protobuf_data.to_connect_value(schema, message))

    def _new_reader(self, schema_id: int, path: tuple[int, ...]) -> tuple[Schema, Any]:
        client = self._require_client()
        registered = client.get_schema(schema_id, fmt="serialized")
        if registered.schema_type != "PROTOBUF":
            raise DataError(f"schema {schema_id} is a {registered.schema_type or 'AVRO'} schema, not Protobuf")
        pool = _protobuf_data.new_pool()
        self._add_references(pool, registered.references or [], set())
        fdp = _file_proto(f"schema {schema_id}", registered.schema_str)
        fdp.name = f"conveyor_schema_{schema_id}.proto"
        try:
            pool.Add(fdp)
        except (TypeError, KeyError, ValueError) as exc:
            raise DataError(f"schema {schema_id} does not build: {exc}") from None
        full_name = _message_name(fdp, path)
        try:
            message_class = message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))
        except KeyError:
            raise DataError(f"schema {schema_id} has no message {full_name!r}") from None
        schema = _protobuf_data.to_connect_schema(pool, message_class.DESCRIPTOR)
        reader = (schema, message_class)
        if len(self._readers) >= self._cache_size:
            self._readers.clear()
        self._readers[(schema_id, path)] = reader
        return reader

    def _add_references(self, pool: Any, references: Sequence[Any], done: set[str]) -> None:
        """Add the files a schema imports, depth first, fetched from their subjects."""
        client = self._require_client()
        for ref in references:
            if ref.name in done or ref.name.startswith(_BUILTIN_PREFIXES):
                continue
            done.add(ref.name)
            referenced = client.get_version(ref.subject, ref.version, False, "serialized")
            self._add_references(pool, referenced.schema.references or [], done)
            fdp = _file_proto(f"reference {ref.name}", referenced.schema.schema_str)
            fdp.name = ref.name
            try:
                pool.Add(fdp)
            except (TypeError, KeyError, ValueError) as exc:
                raise DataError(f"schema reference {ref.name} does not build: {exc}") from None


def _file_proto(what: str, schema_str: str | None) -> descriptor_pb2.FileDescriptorProto:
    """A registered protobuf schema string (base64 serialized ``FileDescriptorProto``) parsed.

    Raises:
        DataError: the string is ``.proto`` text (or anything else that is not the base64 form).
    """
    try:
        raw = base64.b64decode((schema_str or "").encode("ascii"), validate=True)
        return descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, UnicodeEncodeError, ValueError, DecodeError):
        raise DataError(
            f"{what} is .proto text, not a serialized FileDescriptorProto; ProtobufConverter reads only "
            "schemas the registry returns in serialized form (format=serialized, or registered by a "
            "serializer that sends the base64 descriptor), as Python has no .proto parser without protoc"
        ) from None


def _read_indexes(data: bytes, pos: int) -> tuple[tuple[int, ...], int]:
    """Confluent's message-index path at ``data[pos:]``: a zig-zag varint count, then that many
    zig-zag varint indexes; a count of 0 means ``(0,)``. Returns the path and the payload offset."""
    count, pos = _zigzag(data, pos)
    if count == 0:
        return (0,), pos
    if count < 0 or count > 100:
        raise DataError(f"invalid message-index count {count} in the Protobuf framing")
    path = []
    for _ in range(count):
        index, pos = _zigzag(data, pos)
        path.append(index)
    return tuple(path), pos


def _zigzag(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise DataError("truncated message-index varint in the Protobuf framing")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise DataError("invalid message-index varint in the Protobuf framing")


def _message_name(fdp: descriptor_pb2.FileDescriptorProto, path: tuple[int, ...]) -> str:
    """The full name of the message at ``path`` (top-level index, then nested indexes)."""
    messages: Any = fdp.message_type
    names = []
    for index in path:
        if not 0 <= index < len(messages):
            raise DataError(f"message index {index} out of range: {len(messages)} message(s) there")
        names.append(messages[index].name)
        messages = messages[index].nested_type
    return ".".join([fdp.package, *names] if fdp.package else names)

