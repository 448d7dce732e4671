"""No secret value in a config error (issue 11, "first hour" §3): by key, in URLs and
connection strings, and never the whole config."""

import pytest

from conveyor.api import ConfigError, parse_config
from conveyor.api.redaction import HIDDEN, is_secret_key, redact_text, redact_value
from conveyor.connectors.postgres.config import PostgresSinkConfig

CANARY = "CANARY-7f3a"


@pytest.mark.parametrize("key", ["connection.password", "sasl.jaas.config", "archive.s3.secret",
                                 "consumer.override.sasl.password", "rabbitmq.token", "ssl.key.password"])
def test_secret_keys(key):
    assert is_secret_key(key)
    assert redact_value(key, CANARY) == HIDDEN


@pytest.mark.parametrize("key", ["topics", "key.converter", "connection.url", "batch.size"])
def test_plain_keys(key):
    assert not is_secret_key(key)


@pytest.mark.parametrize("text", [
    f"postgresql://app:{CANARY}@db:5432/orders",
    f"amqp://guest:{CANARY}@db/vhost",
    f"host=db user=app password={CANARY} dbname=orders",
    f"host=db password='{CANARY} x' dbname=orders",
])
def test_passwords_in_urls_and_connection_strings_are_hidden(text):
    shown = redact_text(text)
    assert CANARY not in shown and HIDDEN in shown
    assert "db" in shown  # the rest stays readable


def test_a_config_error_never_shows_the_whole_config_nor_a_secret():
    config = {"topic": "orders", "connection.url": f"postgresql://app:{CANARY}@db/orders",
              "connection.password": CANARY, "batch.size": "ten"}
    with pytest.raises(ConfigError) as refused:
        parse_config(PostgresSinkConfig, config)
    text = repr(refused.value.errors)
    assert CANARY not in text, text
    assert "batch.size" in refused.value.errors and "'ten'" in refused.value.errors["batch.size"]
