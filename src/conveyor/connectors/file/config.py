"""Configuration of the file connectors: Kafka Connect's ``FileStreamSinkConnector`` and
``FileStreamSourceConnector`` keys (``ConfigDef`` of connect-file 4.1.1), same names, types
and defaults.

String values are trimmed as Kafka Connect's ``ConfigDef`` trims them (``String.trim()``).

Sink (``file-sink``):

``file`` (string, default none)
    path of the file to append to, created if missing (its directory is not). Absent or
    empty: the task writes to its standard output, as Kafka Connect's FileStreamSinkTask (in
    Conveyor: the Spark Python worker's, which Spark sends to the executor's log).
``topics`` / ``topics.regex``
    the runtime's, as for every sink.

Source (``file-source``):

``file`` (string, required here)
    path of the file to read, exactly as it appears in the source partition
    ``{"filename": <file>}``: a relative path or another spelling of the same file is another
    partition, as in Kafka Connect. Kafka Connect reads standard input when it is absent;
    Conveyor refuses that (a Spark task has no useful standard input, and Kafka Connect keeps
    no offsets for it).
``topic`` (string, required, not empty)
    the one topic every line goes to (a single name, as Kafka Connect's ``topic``; a comma
    list is refused here, where Kafka Connect would fail at the first send).
``batch.size`` (int, default 2000)
    most records one ``poll`` returns. As Kafka Connect, any 32-bit integer is accepted and
    a value below 1 means 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator

from conveyor.api import ConnectorConfig, parse_config

#: Kafka Connect's ``FileStreamSourceConnector.DEFAULT_TASK_BATCH_SIZE``.
DEFAULT_BATCH_SIZE = 2000
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
#: What Java's ``String.trim()`` removes, which ``ConfigDef`` applies to every STRING value.
_JAVA_TRIM = "".join(chr(c) for c in range(33))


def java_trim(value: Any) -> Any:
    """A string value trimmed as ``ConfigDef`` trims STRING values (``String.trim()``)."""
    return value.strip(_JAVA_TRIM) if isinstance(value, str) else value


class FileSinkConfig(ConnectorConfig):
    """Keys of ``file-sink`` (Kafka Connect's ``FileStreamSinkConnector.CONFIG_DEF``)."""

    file: str | None = Field(
        None, description="Destination filename (appended to). If not specified, the standard output is used.")

    @field_validator("file", mode="before")
    @classmethod
    def _trim(cls, value: Any) -> Any:
        return java_trim(value)

    @property
    def path(self) -> str | None:
        """The file to append to, or ``None`` for standard output (absent or empty ``file``)."""
        return self.file or None


class FileSourceConfig(ConnectorConfig):
    """Keys of ``file-source`` (Kafka Connect's ``FileStreamSourceConnector.CONFIG_DEF``);
    :func:`load_source_config` also requires ``file``."""

    file: str | None = Field(None, description="Source filename; its lines become records.")
    topic: str = Field(..., description="The topic to publish data to.")
    batch_size: int = Field(DEFAULT_BATCH_SIZE, alias="batch.size", ge=_INT_MIN, le=_INT_MAX,
                            description="The maximum number of records the source task returns per poll.")

    @field_validator("file", "topic", mode="before")
    @classmethod
    def _trim(cls, value: Any) -> Any:
        return java_trim(value)

    @field_validator("topic")
    @classmethod
    def _one_topic(cls, value: str) -> str:
        if not value:
            raise ValueError("String must be non-empty (as Kafka Connect's NonEmptyString)")
        if "," in value:
            raise ValueError("one topic name, not a list: every line goes to this single topic")
        return value

    @property
    def records_per_poll(self) -> int:
        """``batch.size``, at least 1: Kafka Connect returns once a batch holds ``batch.size``
        records, so 0 or less behaves as 1."""
        return max(1, self.batch_size)

    def problems(self) -> dict[str, str]:
        """``file`` is required (see :meth:`ConnectorConfig.problems`)."""
        if self.file:
            return {}
        return {"file": "required: the path of the file to read. Kafka Connect's FileStreamSourceConnector reads "
                        "standard input when 'file' is absent; Conveyor does not support that (a Spark task has no "
                        "standard input to read, and no offsets are kept for one)"}


def load_source_config(config: Mapping[str, Any]) -> FileSourceConfig:
    """Validate a ``file-source`` configuration.

    Raises:
        ConfigError: a key is invalid, ``topic`` is missing or empty, or ``file`` is absent or
            empty (standard input, which Kafka Connect would read, is not supported).
    """
    return parse_config(FileSourceConfig, config)
