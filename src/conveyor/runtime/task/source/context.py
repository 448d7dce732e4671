"""The runner's implementations of :class:`~conveyor.api.SourceTaskContext` and
:class:`~conveyor.api.TransactionContext` (KIP-618 connector-defined boundaries)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from conveyor.api import OffsetStorageReader, SourceRecord, SourceTaskContext, TransactionContext


class RunnerTransactionContext(TransactionContext):
    """Remembers what the task asked; the runner acts after the named record is sent or
    at the end of the batch."""

    def __init__(self) -> None:
        self._action: str | None = None
        self._record: SourceRecord | None = None

    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        self._action, self._record = "commit", record

    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        self._action, self._record = "abort", record

    def after_record(self, record: SourceRecord) -> bool:
        """True when the task asked to end the transaction right after ``record``."""
        return self._action is not None and self._record is record

    def take(self, batch_end: bool) -> str | None:
        """The requested action (``"commit"``/``"abort"``) if it is due now, cleared."""
        if self._action is None or (batch_end and self._record is not None):
            return None
        action, self._action, self._record = self._action, None, None
        return action


class RunnerSourceContext(SourceTaskContext):
    def __init__(self, configs: Mapping[str, Any], reader: OffsetStorageReader,
                 transaction: RunnerTransactionContext | None) -> None:
        self._configs = dict(configs)
        self._reader = reader
        self.transaction = transaction

    def configs(self) -> Mapping[str, Any]:
        return self._configs

    def offset_storage_reader(self) -> OffsetStorageReader:
        return self._reader

    def transaction_context(self) -> TransactionContext | None:
        return self.transaction
