"""Kafka Connect's FileStream connectors (connect-file 4.1.1) for Conveyor: ``file-sink`` and
``file-source``, with the same configuration keys, output lines and source offsets, so that a
FileStream connector moves between Kafka Connect and Conveyor with its offsets.

Modules: :mod:`.config` (keys), :mod:`.sink` and :mod:`.source` (connectors and tasks, and
where they knowingly differ from Kafka Connect), :mod:`.lines` (line splitting and byte
positions), :mod:`.java_text` (``String.valueOf`` of Connect values, as the sink prints them;
numbers through :mod:`conveyor.java_text.numbers`).
"""

from conveyor.connectors.file.config import FileSinkConfig, FileSourceConfig
from conveyor.connectors.file.sink import FileSinkConnector, FileSinkTask
from conveyor.connectors.file.source import FileSourceConnector, FileSourceTask

__all__ = ["FileSinkConfig", "FileSinkConnector", "FileSinkTask", "FileSourceConfig", "FileSourceConnector",
           "FileSourceTask"]
