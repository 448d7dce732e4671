"""Confluent's storage partitioners for the archive sink (conveyor.connectors.archive.partitioner)."""

from __future__ import annotations

import datetime as dt

import pytest

from conveyor.api import ConfigError, DataError, SinkRecord
from conveyor.connectors.archive.config import load_config
from conveyor.connectors.archive.partitioner import joda_to_strftime, time_folders

HOURLY = "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH"


def _record(timestamp: int | None = None, value=None) -> SinkRecord:
    return SinkRecord(topic="t", kafka_partition=3, key=None, value=value, kafka_offset=7, timestamp=timestamp)


def _ms(*args, tz=dt.timezone.utc) -> int:
    return int(dt.datetime(*args, tzinfo=tz).timestamp() * 1000)


@pytest.mark.parametrize(
    ("joda", "strftime"),
    [
        (HOURLY, "year=%Y/month=%m/day=%d/hour=%H"),
        ("YYYY-MM-dd", "%Y-%m-%d"),
        ("'dt'=yyyyMMdd/'h'=H", "dt=%Y%m%d/h=\x01H"),
        ("'it''s'/DDD", "it's/%j"),
        ("'100%'", "100%%"),
    ],
)
def test_joda_patterns_translate(joda: str, strftime: str) -> None:
    assert joda_to_strftime(joda) == strftime


@pytest.mark.parametrize("bad", ["YYYY/EEE", "'open", "yyyy/ZZ"])
def test_unsupported_joda_patterns_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        joda_to_strftime(bad)


def test_hourly_folders_from_record_time_in_utc_and_in_a_zone() -> None:
    utc = time_folders("HourlyPartitioner", None, -1, "UTC", "Record", "timestamp")
    assert utc.folder(_record(_ms(2026, 11, 27, 8, 59, 59))) == "year=2026/month=11/day=27/hour=08"
    assert utc.folder(_record(_ms(2026, 11, 27, 9, 0, 0))) == "year=2026/month=11/day=27/hour=09"
    kolkata = time_folders(
        "io.confluent.connect.storage.partitioner.TimeBasedPartitioner",
        "YYYY-MM-dd/HH-mm", 30 * 60_000, "Asia/Kolkata", "Record", "timestamp",
    )
    # 08:59 UTC is 14:29 in Kolkata (+05:30): the 30-minute folder starting at 14:00
    assert kolkata.folder(_record(_ms(2026, 11, 27, 8, 59))) == "2026-11-27/14-00"
    assert kolkata.folder(_record(_ms(2026, 11, 27, 9, 0))) == "2026-11-27/14-30"


def test_unpadded_fields_and_literal_braces() -> None:
    folders = time_folders("TimeBasedPartitioner", "'{x}'/M/d/H", 3_600_000, "UTC", "Record", "timestamp")
    assert folders.folder(_record(_ms(2026, 3, 5, 7, 10))) == "{x}/3/5/7"


def test_daily_folders_follow_daylight_saving_time() -> None:
    berlin = time_folders("DailyPartitioner", None, -1, "Europe/Berlin", "Record", "timestamp")
    # 2026-03-29: clocks go forward at 02:00 local; 22:30 UTC on the 28th is 23:30 local
    assert berlin.folder(_record(_ms(2026, 3, 28, 22, 30))) == "year=2026/month=03/day=28"
    assert berlin.folder(_record(_ms(2026, 3, 29, 21, 30))) == "year=2026/month=03/day=29"  # 23:30 CEST
    assert berlin.folder(_record(_ms(2026, 3, 29, 22, 30))) == "year=2026/month=03/day=30"  # 00:30 CEST


def test_record_field_extractor_reads_millis_timestamps_dates_and_text() -> None:
    folders = time_folders("DailyPartitioner", None, -1, "UTC", "RecordField", "meta.at")
    day = "year=2026/month=11/day=27"
    for at in (_ms(2026, 11, 27, 12), dt.datetime(2026, 11, 27, 12, tzinfo=dt.timezone.utc),
               dt.datetime(2026, 11, 27, 12), dt.date(2026, 11, 27), "2026-11-27T12:00:00Z"):
        assert folders.folder(_record(value={"meta": {"at": at}})) == day
    with pytest.raises(DataError, match="field 'meta.at' is missing"):
        folders.folder(_record(value={"meta": {}}))
    with pytest.raises(DataError, match="Unable to determine timestamp"):
        folders.folder(_record(value={"meta": {"at": "yesterday"}}))
    with pytest.raises(DataError, match="has no timestamp"):
        time_folders("DailyPartitioner", None, -1, "UTC", "Record", "x").folder(_record(None))


def test_default_partitioner_has_no_time_folders() -> None:
    assert time_folders("DefaultPartitioner", None, -1, "UTC", "Wallclock", "timestamp") is None


@pytest.mark.parametrize(
    ("config", "key", "message"),
    [
        ({"partitioner.class": "FieldPartitioner"}, "partitioner.class", "unsupported partitioner"),
        ({"partitioner.class": "TimeBasedPartitioner"}, "path.format", "required by TimeBasedPartitioner"),
        ({"partitioner.class": "TimeBasedPartitioner", "path.format": "YYYY"}, "partition.duration.ms", "positive"),
        ({"partitioner.class": "HourlyPartitioner", "timezone": "Mars/Base"}, "timezone", "unknown time zone"),
        ({"partitioner.class": "TimeBasedPartitioner", "path.format": "YYYY/EEE",
          "partition.duration.ms": 1000}, "path.format", "unsupported pattern letters 'EEE'"),
        ({"partitioner.class": "DailyPartitioner", "timestamp.extractor": "Kafka"}, "timestamp.extractor",
         "Wallclock, Record, RecordField"),
    ],
)
def test_partitioner_config_errors_name_the_key(tmp_path, config, key, message) -> None:
    with pytest.raises(ConfigError) as info:
        load_config({"archive.url": str(tmp_path), **config})
    assert key in info.value.errors and message in info.value.errors[key]
