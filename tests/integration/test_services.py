"""The harness really provides Kafka, PostgreSQL and Spark: no mocks, real round trips."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

pytestmark = pytest.mark.integration


def _consume(bootstrap: str, topic: str, *, count: int, isolation: str = "read_committed", timeout: float = 30.0):
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"test-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "isolation.level": isolation,
    })
    records = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while len(records) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"consumer error: {msg.error()}")
            records.append(msg)
    finally:
        consumer.close()
    return records


def test_topic_factory_creates_partitions(kafka_broker, topic_factory):
    topic = topic_factory(3, config={"cleanup.policy": "compact"})
    md = kafka_broker.admin().list_topics(topic=topic, timeout=10)
    assert len(md.topics[topic].partitions) == 3


def test_produce_and_consume(kafka_bootstrap, topic_factory):
    topic = topic_factory()
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    delivered = []
    producer.produce(topic, key=b"k1", value=b"hello", on_delivery=lambda err, msg: delivered.append((err, msg)))
    assert producer.flush(30) == 0
    assert len(delivered) == 1 and delivered[0][0] is None
    assert delivered[0][1].offset() == 0

    (record,) = _consume(kafka_bootstrap, topic, count=1)
    assert (record.key(), record.value(), record.offset()) == (b"k1", b"hello", 0)


def test_transactional_commit_is_visible_to_read_committed(kafka_bootstrap, topic_factory):
    topic = topic_factory()
    producer = Producer({
        "bootstrap.servers": kafka_bootstrap,
        "transactional.id": f"test-tx-{uuid.uuid4().hex[:8]}",
    })
    producer.init_transactions(30)
    # an aborted transaction first: a read_committed consumer must not see it
    producer.begin_transaction()
    producer.produce(topic, value=b"aborted")
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=f"committed-{i}".encode())
    producer.commit_transaction(30)

    records = _consume(kafka_bootstrap, topic, count=3, isolation="read_committed")
    assert [r.value() for r in records] == [b"committed-0", b"committed-1", b"committed-2"]
    uncommitted = _consume(kafka_bootstrap, topic, count=4, isolation="read_uncommitted")
    assert uncommitted[0].value() == b"aborted"


def test_postgres_session_database(postgres_url):
    import psycopg

    table = f"t_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url) as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, name text NOT NULL)")
        conn.execute(f"INSERT INTO {table} VALUES (%s, %s), (%s, %s)", (1, "a", 2, "b"))
        conn.commit()
        assert conn.execute(f"SELECT count(*), max(name) FROM {table}").fetchone() == (2, "b")
        conn.execute(f"DROP TABLE {table}")


def test_pg_database_is_fresh_and_isolated(pg_database, postgres_url):
    import psycopg

    assert pg_database != postgres_url
    with psycopg.connect(pg_database) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
        assert tables == (0,)
        conn.execute("CREATE TABLE audit (id bigserial PRIMARY KEY, payload jsonb)")
        conn.execute("INSERT INTO audit (payload) VALUES ('{\"a\": 1}')")
        conn.commit()
        assert conn.execute("SELECT payload->>'a' FROM audit").fetchone() == ("1",)


def test_spark_runs_jobs(spark):
    assert spark.sparkContext.parallelize(range(10), 2).sum() == 45
    assert spark.sparkContext.master.startswith("local[")
