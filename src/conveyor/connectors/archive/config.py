"""Configuration of the archive sink (keys follow Confluent's S3 sink where the concept exists).

``archive.url`` (required)
    where the archive lives, as an fsspec URL: ``file:///data/archive`` (or simply
    ``/data/archive``; local paths must be absolute), ``s3://bucket/prefix`` (through s3fs;
    ``s3a://`` too), or any other protocol fsspec knows and whose package is installed
    (``memory://``, ``gs://`` with gcsfs, ...). A trailing ``/`` is ignored.
``format`` (``jsonl`` | ``avro`` | ``parquet``, default ``jsonl``)
    ``jsonl``: one JSON object per line (UTF-8, ``\\n``-terminated). ``avro``: an Avro
    object container file written with fastavro; the Avro schema is derived from the
    records' Connect schemas, and a schemaless key or value is stored as JSON text in a
    string field (see :mod:`conveyor.connectors.archive.formats`). ``parquet``: a Parquet
    file written with pyarrow, its columns derived from the Connect schemas the same way
    (see :mod:`conveyor.connectors.archive.parquet_format`), in row groups of
    ``min(flush.size, 100000)`` records: one row group per file with the default
    ``flush.size``, ``ceil(n / 100000)`` for a file of ``n`` records above that.
    The extension is ``.jsonl``, ``.avro`` or ``.parquet``.
``format.class`` (Confluent's key; unset by default)
    instead of ``format``, files of record values only, byte-compatible with Confluent's S3
    sink: ``io.confluent.connect.s3.format.avro.AvroFormat``, ``...json.JsonFormat``,
    ``...bytearray.ByteArrayFormat``, with ``behavior.on.null.values`` (``fail`` |
    ``ignore``), ``json.decimal.format`` (``BASE64`` | ``NUMERIC``),
    ``format.bytearray.separator`` and ``format.bytearray.extension``; see
    :mod:`conveyor.connectors.archive.value_formats`.
``flush.size`` (int >= 1, default 100000)
    records per file per partition: a partition's buffer is written as one file when it
    holds this many records (Confluent's ``flush.size``).
``rotate.interval.ms`` (int, milliseconds, default -1 = off)
    also write a partition's buffer once this much wall-clock time has passed since its
    first record was buffered, even if it holds fewer than ``flush.size`` records.
    Checked at the start of every ``put`` and in every ``pre_commit`` (so the effective
    granularity is the runtime's ``offset.flush.interval.ms`` when no records arrive).
    Must be -1 or positive.
``topics.dir`` (default ``topics``)
    the folder under ``archive.url`` that holds one folder per topic (Confluent's S3 sink
    key); files go to ``<archive.url>/<topics.dir>/<topic>/partition=<p>/``. ``""`` puts
    the topic folders directly under ``archive.url``. May not start or end with ``/`` or
    hold ``..``; inner ``/`` make nested folders.
``partitioner.class`` (default ``io.confluent.connect.storage.partitioner.DefaultPartitioner``)
    the folder of each file under ``<topics.dir>/<topic>/``: ``partition=<p>`` by default;
    time folders with ``TimeBasedPartitioner`` / ``HourlyPartitioner`` /
    ``DailyPartitioner`` and their keys ``path.format``, ``partition.duration.ms``,
    ``timezone``, ``locale``, ``timestamp.extractor``, ``timestamp.field`` (see
    :mod:`conveyor.connectors.archive.partitioner`).
``filename.offset.zero.pad.width`` (int >= 1, default 10)
    the start offset in file names is zero-padded to this many digits (Confluent's key and
    default); larger offsets simply have more digits.
``file.name.format`` (default ``${topic}+${partition}+${start_offset}``)
    the file name inside the partition's folder, without extension
    (``.jsonl``, ``.avro`` or ``.parquet`` is appended). Placeholders: ``${topic}``, ``${partition}``,
    ``${start_offset}`` (the file's first offset, zero-padded). It must hold
    ``${start_offset}`` exactly once (names are derived from the first offset so that a file
    rewritten after a crash replaces the earlier one), may not contain ``/`` and may not
    start with ``.`` (hidden names are the connector's temporary files).
``avro.codec`` (``null`` | ``deflate``, default ``null``)
    compression of Avro blocks.
``parquet.codec`` (``none`` | ``snappy`` | ``gzip`` | ``zstd`` | ``lz4``, default ``snappy``)
    compression of Parquet column chunks (Confluent's key and default; written by pyarrow's
    codec of that name). Only used with ``format=parquet``.
``retry.backoff.ms`` (int >= 0, milliseconds, default 5000)
    the delay of the :class:`~conveyor.api.RetriableError` raised when the storage is
    unreachable (the runtime redelivers the batch / retries the commit after it).

Storage options, passed to ``fsspec.filesystem(protocol, **options)``:

``archive.s3.endpoint.url`` (s3 only)
    S3 API endpoint, e.g. ``http://minio:9000`` (s3fs ``endpoint_url``). Default: AWS.
``archive.s3.key`` / ``archive.s3.secret`` (s3 only)
    access key id / secret access key. Default: the usual AWS credential chain
    (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``, profile, instance role). The secret
    is never logged or shown in errors.
``s3.part.size`` (int, bytes, 5 MiB..2 GiB, default 26214400 = 25 MiB; s3 only)
    Confluent's key: a file of at least twice this size is sent as a multipart upload in
    parts of this size (smaller files in one ``PUT``). A multipart file becomes visible only
    when complete; a failed upload is aborted, and one left by a crash or an outage is
    aborted before the same file is uploaded again.
``archive.s3.region`` (s3 only)
    region name (s3fs ``client_kwargs.region_name``).
``archive.storage.<option>[.<sub>...]``
    any other fsspec / s3fs option; dots nest: ``archive.storage.client_kwargs.verify=false``
    becomes ``client_kwargs={"verify": False}``. A mapping under ``archive.storage`` works
    too. String values ``true`` / ``false`` and integers / decimals are converted to
    ``bool`` / ``int`` / ``float`` (as Kafka Connect configs are strings), except for
    options whose name contains ``key``, ``secret``, ``token`` or ``password``.
    For S3 the connector sets botocore's ``config_kwargs={"connect_timeout": 10,
    "read_timeout": 60, "retries": {"max_attempts": 3, "mode": "standard"}}`` (keys given under
    ``archive.storage.config_kwargs`` replace these one by one), and s3fs's own ``retries``
    (an attribute, not an option) is 1: botocore already retries, and s3fs's default of 5 on
    top would multiply every wait by five. So an unreachable endpoint fails a write in seconds
    and a silent one within about three minutes (as a retriable error), not a quarter of an hour.

``name``
    the connector name (set by the runtime); only used in messages.

Invalid values raise :class:`~conveyor.api.ConfigError` naming the key and the expected
type or value, e.g. ``flush.size: Input should be greater than or equal to 1 (got 0)``.
"""

from __future__ import annotations

import copy
import enum
import os
import re
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import urlsplit

import fsspec
from pydantic import BeforeValidator, Field, SecretStr, field_validator, model_validator

from conveyor.api import ConfigError, ConnectorConfig, parse_config
from conveyor.connectors.archive.partitioner import TimeFolders, time_folders

STORAGE_PREFIX = "archive.storage."
DEFAULT_FILE_NAME_FORMAT = "${topic}+${partition}+${start_offset}"
PLACEHOLDERS = ("${topic}", "${partition}", "${start_offset}")
#: ``format.class`` values (Confluent's S3 sink formats) → extension; ByteArrayFormat's is configurable.
VALUE_FORMAT_EXTENSIONS = {
    "io.confluent.connect.s3.format.avro.AvroFormat": ".avro",
    "io.confluent.connect.s3.format.json.JsonFormat": ".json",
    "io.confluent.connect.s3.format.bytearray.ByteArrayFormat": None,
}
DEFAULT_OFFSET_PAD_WIDTH = 10
DEFAULT_TOPICS_DIR = "topics"
S3_PROTOCOLS = ("s3", "s3a")
MIN_PART_SIZE = 5 * 2**20  # S3's smallest part (all but the last)
DEFAULT_PART_SIZE = 25 * 2**20
S3_DEFAULT_CONFIG_KWARGS: dict[str, Any] = {
    "connect_timeout": 10,
    "read_timeout": 60,
    "retries": {"max_attempts": 3, "mode": "standard"},
}
S3FS_RETRIES = 1
"""Attempts of each s3fs call (``S3FileSystem.retries``, default 5), each with botocore's own."""
_PLACEHOLDER = re.compile(r"\$\{[^}]*\}")
_SECRETISH = ("key", "secret", "token", "password")
_INT = re.compile(r"[-+]?\d+")
_FLOAT = re.compile(r"[-+]?\d+\.\d+")


class ArchiveFormat(str, enum.Enum):
    """File format of the archive."""

    JSONL = "jsonl"
    AVRO = "avro"
    PARQUET = "parquet"

    @property
    def extension(self) -> str:
        return "." + self.value


class NullValues(str, enum.Enum):
    """``behavior.on.null.values`` of the value-only formats (``format.class``)."""

    FAIL = "fail"
    IGNORE = "ignore"


class DecimalFormat(str, enum.Enum):
    """``json.decimal.format``: how ``JsonFormat`` writes Decimals (as ``JsonConverter``)."""

    BASE64 = "BASE64"
    NUMERIC = "NUMERIC"


class AvroCodec(str, enum.Enum):
    """Compression of Avro blocks."""

    NULL = "null"
    DEFLATE = "deflate"


class ParquetCodec(str, enum.Enum):
    """Compression of Parquet column chunks (pyarrow's names)."""

    NONE = "none"
    SNAPPY = "snappy"
    GZIP = "gzip"
    ZSTD = "zstd"
    LZ4 = "lz4"


def _lower(value: Any) -> Any:
    return value.lower().strip() if isinstance(value, str) else value


def _upper(value: Any) -> Any:
    return value.upper().strip() if isinstance(value, str) else value


def _coerce(option: str, value: Any) -> Any:
    """Kafka-Connect-style string values → Python values (see the module docstring)."""
    if isinstance(value, Mapping):
        return {str(k): _coerce(str(k), v) for k, v in value.items()}
    if not isinstance(value, str) or any(word in option.lower() for word in _SECRETISH):
        return value
    text = value.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return value


def _nest(target: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = target
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = _coerce(parts[-1], value)


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` merged in, recursively for nested mappings."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class ArchiveSinkConfig(ConnectorConfig):
    """Validated configuration; build it with :func:`load_config`."""

    name: str | None = Field(None, description="connector name (set by the runtime in task configs)")
    archive_url: str = Field(alias="archive.url", description="fsspec URL of the archive root")
    format: Annotated[ArchiveFormat, BeforeValidator(_lower)] = Field(ArchiveFormat.JSONL, alias="format")
    format_class: str | None = Field(None, alias="format.class")
    behavior_on_null_values: Annotated[NullValues, BeforeValidator(_lower)] = Field(
        NullValues.FAIL, alias="behavior.on.null.values"
    )
    json_decimal_format: Annotated[DecimalFormat, BeforeValidator(_upper)] = Field(
        DecimalFormat.BASE64, alias="json.decimal.format"
    )
    bytearray_separator: str = Field("\n", alias="format.bytearray.separator")
    bytearray_extension: str = Field(".bin", alias="format.bytearray.extension")
    flush_size: int = Field(100_000, alias="flush.size", ge=1, description="records per file per partition")
    rotate_interval_ms: int = Field(
        -1, alias="rotate.interval.ms", description="ms since a buffer's first record; -1 off"
    )
    topics_dir: str = Field(DEFAULT_TOPICS_DIR, alias="topics.dir")
    offset_pad_width: int = Field(DEFAULT_OFFSET_PAD_WIDTH, alias="filename.offset.zero.pad.width", ge=1, le=19)
    file_name_format: str = Field(DEFAULT_FILE_NAME_FORMAT, alias="file.name.format")
    partitioner_class: str = Field("io.confluent.connect.storage.partitioner.DefaultPartitioner",
                                   alias="partitioner.class")
    path_format: str | None = Field(None, alias="path.format")
    partition_duration_ms: int = Field(-1, alias="partition.duration.ms")
    timezone: str = Field("UTC", alias="timezone")
    locale: str = Field("", alias="locale")
    timestamp_extractor: str = Field("Wallclock", alias="timestamp.extractor")
    timestamp_field: str = Field("timestamp", alias="timestamp.field")
    avro_codec: Annotated[AvroCodec, BeforeValidator(_lower)] = Field(AvroCodec.NULL, alias="avro.codec")
    parquet_codec: Annotated[ParquetCodec, BeforeValidator(_lower)] = Field(ParquetCodec.SNAPPY, alias="parquet.codec")
    retry_backoff_ms: int = Field(5000, alias="retry.backoff.ms", ge=0)
    s3_endpoint_url: str | None = Field(None, alias="archive.s3.endpoint.url")
    s3_key: str | None = Field(None, alias="archive.s3.key")
    s3_secret: SecretStr | None = Field(None, alias="archive.s3.secret")
    s3_region: str | None = Field(None, alias="archive.s3.region")
    s3_part_size: int = Field(DEFAULT_PART_SIZE, alias="s3.part.size", ge=MIN_PART_SIZE, le=2**31 - 1)
    storage: dict[str, Any] = Field(default_factory=dict, alias="archive.storage", repr=False)

    @model_validator(mode="before")
    @classmethod
    def _collect_storage_options(cls, data: Any) -> Any:
        """Gather ``archive.storage.*`` keys into the ``archive.storage`` mapping."""
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        options: dict[str, Any] = {}
        given = data.get("archive.storage", data.get("storage"))
        if isinstance(given, Mapping):
            options = {str(k): _coerce(str(k), v) for k, v in given.items()}
        elif given is not None:
            return data  # let pydantic report the type error for archive.storage
        for key in [k for k in data if isinstance(k, str) and k.startswith(STORAGE_PREFIX)]:
            option = key[len(STORAGE_PREFIX) :]
            if option:
                _nest(options, option, data.pop(key))
        data["archive.storage"] = options
        data.pop("storage", None)
        return data

    @field_validator("archive_url")
    @classmethod
    def _strip_url(cls, value: str) -> str:
        value = value.strip()
        stripped = value.rstrip("/")
        return stripped if stripped and not stripped.endswith(":") else value

    @field_validator("rotate_interval_ms")
    @classmethod
    def _check_rotate(cls, value: int) -> int:
        if value != -1 and value < 1:
            raise ValueError("must be -1 (off) or a positive number of milliseconds")
        return value

    @field_validator("topics_dir")
    @classmethod
    def _check_topics_dir(cls, value: str) -> str:
        value = value.strip()
        if value.startswith("/") or value.endswith("/") or "\\" in value:
            raise ValueError("must be a relative folder without a leading or trailing '/' (e.g. topics)")
        if any(part in ("", ".", "..") for part in value.split("/")) and value:
            raise ValueError("must not hold empty, '.' or '..' path segments")
        return value

    @field_validator("file_name_format")
    @classmethod
    def _check_file_name_format(cls, value: str) -> str:
        problem = file_name_format_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    # -- derived ------------------------------------------------------------------------

    @property
    def extension(self) -> str:
        """The file name extension (with its dot) of the chosen format."""
        if self.format_class:
            return VALUE_FORMAT_EXTENSIONS.get(self.format_class.strip()) or self.bytearray_extension
        return self.format.extension

    @property
    def protocol(self) -> str:
        """The URL's protocol (``file`` for a plain path)."""
        return url_protocol(self.archive_url)

    @property
    def is_local(self) -> bool:
        return self.protocol in ("file", "local")

    def time_folders(self) -> TimeFolders | None:
        """The time-based partitioner's folders, or ``None`` for ``DefaultPartitioner``.

        Raises:
            ConfigError: naming the partitioner key at fault.
        """
        return time_folders(self.partitioner_class, self.path_format, self.partition_duration_ms, self.timezone,
                            self.timestamp_extractor.strip(), self.timestamp_field)

    def storage_options(self) -> dict[str, Any]:
        """Keyword arguments for ``fsspec.filesystem`` (holds the secret: never log it)."""
        options: dict[str, Any] = {}
        if self.protocol in S3_PROTOCOLS:
            options["config_kwargs"] = copy.deepcopy(S3_DEFAULT_CONFIG_KWARGS)  # botocore rewrites "retries" in place
            if self.s3_endpoint_url:
                options["endpoint_url"] = self.s3_endpoint_url
            if self.s3_key:
                options["key"] = self.s3_key
            if self.s3_secret is not None:
                options["secret"] = self.s3_secret.get_secret_value()
            if self.s3_region:
                options["client_kwargs"] = {"region_name": self.s3_region}
        return deep_merge(options, self.storage)

    def problems(self) -> dict[str, str]:
        """What does not fit across keys (see :meth:`ConnectorConfig.problems`)."""
        errors: dict[str, str] = {}
        problem = _url_problem(self)
        if problem:
            errors["archive.url"] = problem
        if self.protocol not in S3_PROTOCOLS:
            for key, value in (
                ("archive.s3.endpoint.url", self.s3_endpoint_url),
                ("archive.s3.key", self.s3_key),
                ("archive.s3.secret", self.s3_secret),
                ("archive.s3.region", self.s3_region),
            ):
                if value is not None:
                    errors[key] = f"only applies to s3:// archive URLs (archive.url is {self.protocol}://)"
        if self.format_class and self.format_class.strip() not in VALUE_FORMAT_EXTENSIONS:
            known = ", ".join(VALUE_FORMAT_EXTENSIONS)
            errors["format.class"] = f"unsupported format class {self.format_class!r}; supported: {known}"
        if not self.bytearray_extension.startswith(".") or "/" in self.bytearray_extension:
            errors["format.bytearray.extension"] = "must start with '.' and hold no '/' (e.g. .bin)"
        try:
            self.time_folders()
        except ConfigError as exc:
            errors.update(exc.errors)
        return errors


def url_protocol(url: str) -> str:
    """``"s3://b/p"`` → ``"s3"``; ``"/data"`` → ``"file"``."""
    if "://" not in url:
        return "file"
    return url.split("://", 1)[0].lower()


def file_name_format_problem(fmt: str) -> str | None:
    """Why ``fmt`` is not a usable ``file.name.format``, or ``None``."""
    if not fmt:
        return "must not be empty"
    unknown = sorted(set(_PLACEHOLDER.findall(fmt)) - set(PLACEHOLDERS))
    if unknown:
        return f"unknown placeholder(s) {', '.join(unknown)}; use {', '.join(PLACEHOLDERS)}"
    if fmt.count("${start_offset}") != 1:
        return "must contain ${start_offset} exactly once (file names are derived from the first offset)"
    if "/" in fmt or "\\" in fmt:
        return "must not contain '/' or '\\' (files go to <archive.url>/<topics.dir>/<topic>/partition=<p>/)"
    if fmt.startswith("."):
        return "must not start with '.' (hidden names are reserved for temporary files)"
    return None


def render_file_name(
    fmt: str, topic: str, partition: int, start_offset: int, extension: str, pad_width: int = DEFAULT_OFFSET_PAD_WIDTH
) -> str:
    """The file name for a file whose first record is at ``start_offset`` (zero-padded to
    ``pad_width`` digits)."""
    return (
        fmt.replace("${topic}", topic)
        .replace("${partition}", str(partition))
        .replace("${start_offset}", f"{start_offset:0{pad_width}d}")
        + extension
    )


def file_name_pattern(
    fmt: str, topic: str, partition: int, extension: str, pad_width: int = DEFAULT_OFFSET_PAD_WIDTH
) -> re.Pattern[str]:
    """A regex matching this partition's file names (start offsets of at least ``pad_width``
    digits); group 1 is the start offset."""
    parts = re.split(r"(\$\{topic\}|\$\{partition\}|\$\{start_offset\})", fmt)
    regex = ""
    for part in parts:
        if part == "${topic}":
            regex += re.escape(topic)
        elif part == "${partition}":
            regex += re.escape(str(partition))
        elif part == "${start_offset}":
            regex += rf"(\d{{{pad_width},}})"
        else:
            regex += re.escape(part)
    return re.compile(regex + re.escape(extension))


def _url_problem(cfg: ArchiveSinkConfig) -> str | None:
    url = cfg.archive_url
    if not url:
        return "a URL (string) is required, e.g. file:///data/archive or s3://bucket/prefix"
    protocol = cfg.protocol
    if protocol in ("file", "local"):
        path = url.split("://", 1)[1] if "://" in url else url
        if not os.path.isabs(path):
            return f"a local archive path must be absolute (file:///data/archive), got {url!r}"
        return None
    if protocol in S3_PROTOCOLS:
        bucket = urlsplit(url).netloc
        if not bucket:
            return f"an S3 URL needs a bucket: s3://bucket[/prefix], got {url!r}"
    try:
        fsspec.get_filesystem_class(protocol)
    except ValueError:
        return f"unknown storage protocol {protocol!r} (fsspec knows no such protocol)"
    except ImportError as exc:
        return f"protocol {protocol!r} needs a package that is not installed: {exc}"
    return None


def load_config(config: Mapping[str, Any]) -> ArchiveSinkConfig:
    """Parse and cross-check a configuration mapping (no I/O).

    Raises:
        ConfigError: naming each invalid key with the expected type or value.
    """
    return parse_config(ArchiveSinkConfig, config)
