"""Shared pytest configuration: the conveyor test harness fixtures (real Kafka, PostgreSQL, Spark, S3, Schema Registry, ...).

See tests/README.md and ``conveyor.testing.pytest_plugin`` for the fixtures.
"""

pytest_plugins = ["conveyor.testing.pytest_plugin", "conveyor.testing.pytest_rabbitmq", "conveyor.testing.pytest_s3",
                  "conveyor.testing.pytest_schema_registry",
                  "conveyor.testing.pytest_kube", "conveyor.testing.pytest_node"]
