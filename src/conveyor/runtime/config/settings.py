"""The runtime's own keys in ``spec.config`` (Kafka Connect's worker/connector keys).

Validated once on the driver; a bad value names its key and the expected type.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from pydantic import Field, model_validator

from conveyor.api import ConfigError, ConnectorConfig, parse_config
from conveyor.api.redaction import redact_text


class ErrorTolerance(str, enum.Enum):
    """``errors.tolerance``: ``none`` fails the task on the first bad record; ``all`` skips it."""

    NONE = "none"
    ALL = "all"


class GroupProtocol(str, enum.Enum):
    """``group.protocol`` of a sink task's consumer (``consumer.override.group.protocol``):
    ``classic`` is the JoinGroup/SyncGroup protocol with a client-side cooperative-sticky
    assignor; ``consumer`` is KIP-848's, where the broker assigns partitions (incrementally) and
    owns the session and heartbeat timing (``group.consumer.session.timeout.ms``,
    ``group.consumer.heartbeat.interval.ms``) and the assignor (``group.remote.assignor``)."""

    CLASSIC = "classic"
    CONSUMER = "consumer"


CLASSIC_PROTOCOL_ONLY = ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms",
                         "group.protocol.type")
"""Consumer keys of the classic group protocol only: with ``group.protocol=consumer`` the broker
owns them, and both librdkafka and the Java consumer refuse them (KIP-848 §client configs)."""


class CommonSettings(ConnectorConfig):
    """Keys every connector understands."""

    offset_flush_interval_ms: int = Field(
        60_000, alias="offset.flush.interval.ms", ge=1, description="Milliseconds between offset commits."
    )
    errors_tolerance: ErrorTolerance = Field(ErrorTolerance.NONE, alias="errors.tolerance")
    errors_retry_timeout: int = Field(
        0, alias="errors.retry.timeout", ge=-1, description="Milliseconds to retry a failed operation; -1 forever."
    )
    errors_retry_delay_max_ms: int = Field(60_000, alias="errors.retry.delay.max.ms", ge=0)
    errors_log_enable: bool = Field(False, alias="errors.log.enable")
    errors_log_include_messages: bool = Field(False, alias="errors.log.include.messages")
    key_converter: str = Field("org.apache.kafka.connect.storage.StringConverter", alias="key.converter")
    value_converter: str = Field("org.apache.kafka.connect.json.JsonConverter", alias="value.converter")
    batch_path: bool = Field(
        True,
        alias="conveyor.batch.path.enable",
        description="Move records as Arrow batches where the batch path applies (conveyor.api.batches): to a sink "
        "task that implements put_batch(), from a source task that implements poll_batch(); false gives every "
        "sink task records through put() and calls every source task's poll().",
    )

    @property
    def offset_flush_interval(self) -> timedelta:
        return timedelta(milliseconds=self.offset_flush_interval_ms)


class SinkSettings(CommonSettings):
    """Keys of sink connectors (Kafka Connect's ``SinkConnectorConfig``)."""

    topics: list[str] = Field(default_factory=list, description="Topics to consume, comma-separated.")
    topics_regex: str | None = Field(None, alias="topics.regex", description="Regex of topics to consume.")
    dlq_topic: str | None = Field(None, alias="errors.deadletterqueue.topic.name")
    dlq_replication_factor: int = Field(3, alias="errors.deadletterqueue.topic.replication.factor", ge=-1)
    dlq_context_headers: bool = Field(False, alias="errors.deadletterqueue.context.headers.enable")
    closing_aware_commits: bool = Field(
        True,
        alias="conveyor.closing.aware.commits",
        description="is_closing() is true in closing pre_commit calls (KIP-275). false reproduces Kafka Connect, "
        "where it does not exist; for comparisons only.",
    )
    max_poll_records: int = Field(
        500, alias="consumer.override.max.poll.records", ge=1, description="Largest batch handed to put()."
    )
    batch_max_records: int = Field(
        5000,
        alias="conveyor.batch.max.records",
        ge=1,
        description="Largest record batch read at once on the batch path (put_batch); what librdkafka has already "
        "fetched (queued.max.messages.kbytes) bounds it too. Arrow's kernels cost tens of microseconds a call, so "
        "larger batches cost less per record; max.poll.records applies to put().",
    )

    group_protocol: GroupProtocol = Field(
        GroupProtocol.CLASSIC,
        alias="consumer.override.group.protocol",
        description="The consumer group protocol of the sink tasks: classic, or consumer (KIP-848).",
    )
    classic_only_overrides: tuple[str, ...] = Field(
        (), description="The consumer.override.* keys set of CLASSIC_PROTOCOL_ONLY (set from the config, not a key)."
    )

    @model_validator(mode="before")
    @classmethod
    def _split_topics(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            if isinstance(data.get("topics"), str):
                data["topics"] = [t.strip() for t in data["topics"].split(",") if t.strip()]
            data["classic_only_overrides"] = tuple(
                f"consumer.override.{key}" for key in CLASSIC_PROTOCOL_ONLY if f"consumer.override.{key}" in data)
        return data

    def problems(self) -> dict[str, str]:
        if self.group_protocol is not GroupProtocol.CONSUMER:
            return {}
        return {key: "not used with consumer.override.group.protocol=consumer (KIP-848): the broker's "
                     "group.consumer.* settings and group.remote.assignor take its place; remove it"
                for key in self.classic_only_overrides}

    @model_validator(mode="after")
    def _one_topic_source(self) -> SinkSettings:
        if bool(self.topics) == bool(self.topics_regex):
            raise ValueError("exactly one of 'topics' and 'topics.regex' must be set")
        if self.topics_regex is not None:
            try:
                re.compile(self.topics_regex)
            except re.error as exc:
                raise ValueError(f"topics.regex is not a valid regex: {exc}") from None
        if self.dlq_topic and self.dlq_topic in self.topics:
            raise ValueError("errors.deadletterqueue.topic.name must not be one of the consumed topics")
        return self

    @property
    def subscription(self) -> list[str]:
        """What to pass to ``Consumer.subscribe``: topic names or one ``^regex``."""
        if self.topics_regex is not None:
            return ["^" + self.topics_regex.lstrip("^")]
        return list(self.topics)


class ExactlyOnceSupport(str, enum.Enum):
    """``exactly.once.support`` (KIP-618): ``requested`` runs with transactions whatever
    the connector declares; ``required`` refuses to start unless the connector's
    ``exactly_once_support()`` says ``SUPPORTED``."""

    REQUESTED = "requested"
    REQUIRED = "required"


class TransactionBoundary(str, enum.Enum):
    """``transaction.boundary`` (KIP-618): where exactly-once transactions end."""

    POLL = "poll"
    INTERVAL = "interval"
    CONNECTOR = "connector"


class SourceSettings(CommonSettings):
    """Keys of source connectors (Kafka Connect's ``SourceConnectorConfig``, KIP-618)."""

    exactly_once_support: ExactlyOnceSupport | None = Field(
        None, alias="exactly.once.support",
        description="Unset: at-least-once with an idempotent producer. requested/required: transactions.",
    )
    transaction_boundary: TransactionBoundary = Field(TransactionBoundary.POLL, alias="transaction.boundary")
    transaction_boundary_interval_ms: int | None = Field(
        None, alias="transaction.boundary.interval.ms", ge=1,
        description="With transaction.boundary=interval; default offset.flush.interval.ms.",
    )
    offsets_storage_topic: str = Field("connect-offsets", alias="offsets.storage.topic", min_length=1)
    config_storage_topic: str = Field(
        "conveyor-configs", alias="config.storage.topic", min_length=1,
        description="Compacted topic of task-count records used for zombie fencing.",
    )
    offset_flush_timeout_ms: int = Field(5000, alias="offset.flush.timeout.ms", ge=1)
    transaction_timeout_ms: int = Field(
        60_000, alias="producer.override.transaction.timeout.ms", ge=1,
        description="The producers' transaction.timeout.ms; must not exceed the brokers' transaction.max.timeout.ms.",
    )

    @property
    def exactly_once(self) -> bool:
        return self.exactly_once_support is not None

    @property
    def transaction_interval_ms(self) -> int:
        return self.transaction_boundary_interval_ms or self.offset_flush_interval_ms


def parse_source_settings(config: Mapping[str, Any]) -> SourceSettings:
    """Validate the runtime keys of a source connector's config.

    Raises:
        ConfigError: naming each invalid key.
    """
    return parse_config(SourceSettings, config)


def prefixed(config: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The keys under ``prefix`` with the prefix removed, values as strings for librdkafka."""
    return {k[len(prefix) :]: _as_client_value(v) for k, v in config.items() if k.startswith(prefix)}


def _as_client_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def parse_sink_settings(config: Mapping[str, Any]) -> SinkSettings:
    """Validate the runtime keys of a sink connector's config.

    Raises:
        ConfigError: naming each invalid key.
    """
    try:
        return parse_config(SinkSettings, config)
    except ConfigError:
        raise
    except ValueError as exc:  # pragma: no cover - model validators surface through parse_config
        raise ConfigError({"": redact_text(str(exc))}) from None
