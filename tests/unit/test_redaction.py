"""No secret value in a config error (issue 11, "first hour" §3): by key, in URLs and
connection strings, and never the whole config."""

import pytest

from conveyor.api import ConfigError, parse_config
from conveyor.api.redaction import HIDDEN, is_secret_key, redact_text, redact_value
from conveyor.connectors.postgres.config import PostgresSinkConfig

CANARY = "CANARY-7f3a"


@pytest.mark.parametrize("key", ["connection.password", "sasl.jaas.config", "archive.s3.secret",
                                 "consumer.override.sasl.password", "rabbitmq.token", "ssl.key.password",
                                 "value.converter.basic.auth.user.info",
                                 "key.converter.schema.registry.basic.auth.user.info",
                                 # issue 28: private keys, account keys, passphrases
                                 "ssl.keystore.key", "producer.override.ssl.keystore.key", "ssl.key.pem",
                                 "consumer.override.ssl.key.pem", "ssl_key", "azure.account.key",
                                 "azblob.account.key", "ssl.keystore.password", "ssl.truststore.password",
                                 "sasl.oauthbearer.assertion.private.key.passphrase",
                                 "sasl.oauthbearer.client.credentials.client.secret"])
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


def test_a_resolved_value_is_shown_as_its_reference_whatever_its_key(monkeypatch, tmp_path):
    from conveyor.api.redaction import redact_data
    from conveyor.manifest import substitute_env

    value = "provenance-canary-91c2"
    config = substitute_env({"spec": {"config": {"table.name.format": "${env:TABLE_NAME}"}}},
                            {"TABLE_NAME": value})
    assert config["spec"]["config"]["table.name.format"] == value
    assert redact_value("table.name.format", value) == "${env:TABLE_NAME}"
    assert redact_text(f'relation "{value}" does not exist') == 'relation "${env:TABLE_NAME}" does not exist'
    assert redact_data({"trace": [f"error in {value}"]}) == {"trace": ["error in ${env:TABLE_NAME}"]}


def test_short_resolved_values_are_hidden_whole_but_not_searched_in_text():
    from conveyor.api.redaction import remember_resolved

    remember_resolved("42", "${env:BATCH}")
    assert redact_value("batch.size", "42") == "${env:BATCH}"
    assert redact_text("wrote 42 rows") == "wrote 42 rows"


def test_configfrom_and_secret_references_are_remembered(tmp_path, monkeypatch):
    from conveyor.manifest import ConnectorSpec, resolve_mounted_config

    secret_dir = tmp_path / "secrets" / "db"
    secret_dir.mkdir(parents=True)
    (secret_dir / "user").write_text("configfrom-user-canary\n")
    (secret_dir / "dsn").write_text("secret-ref-canary-dsn")
    spec = ConnectorSpec.model_validate({
        "class": "postgres-sink", "kafka": {"bootstrapServers": "k:9092"},
        "configFrom": [{"secretRef": {"name": "db"}, "prefix": "connection."}],
        "config": {"topics": "t", "my.dsn": "${secret:db:dsn}"}})
    resolved = resolve_mounted_config(spec, tmp_path)
    assert resolved["connection.user"] == "configfrom-user-canary\n"
    assert redact_text("login configfrom-user-canary failed") == "login ${secret:db:user} failed"
    assert redact_text("dsn secret-ref-canary-dsn") == "dsn ${secret:db:dsn}"


def test_log_records_are_redacted_messages_and_tracebacks(caplog):
    import logging

    from conveyor.api.redaction import RedactSecrets, remember_resolved

    remember_resolved("log-canary-value-77", "${env:LOG_CANARY}")
    record = logging.LogRecord("t", logging.ERROR, __file__, 1, "failed with %s", ("log-canary-value-77",), None)
    try:
        raise RuntimeError("boom log-canary-value-77")
    except RuntimeError:
        import sys

        record.exc_info = sys.exc_info()
    assert RedactSecrets().filter(record)
    text = logging.Formatter().format(record)
    assert "log-canary-value-77" not in text and "RuntimeError: boom ${env:LOG_CANARY}" in text


# ---------------------------------------------------------------- issue 28: more secret keys, free text

@pytest.mark.parametrize("key", ["ssl.key.location", "ssl.keystore.location", "ssl.truststore.certificates",
                                 "ssl.keystore.certificate.chain", "ssl.certificate.pem", "ssl.ca.pem",
                                 "key.converter", "key.ignore", "azure.account.name"])
def test_paths_certificates_and_key_converters_are_not_secret(key):
    assert not is_secret_key(key)


PEM = f"-----BEGIN RSA PRIVATE KEY-----\nMIIEow{CANARY}AKCAQEA\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize("text", [
    f"config {{'topics': 'orders', 'ssl.keystore.key': {PEM!r}}}",
    f'{{"ssl.key.pem": "{CANARY}", "topics": "orders"}}',
    f"ssl.keystore.key={CANARY} topics=orders",
    f"sasl.jaas.config=\"org.apache.kafka.common.security.plain.PlainLoginModule required password='{CANARY}';\"",
    f"key material follows\n{PEM}\nend",
    f"truncated: -----BEGIN PRIVATE KEY-----\nMII{CANARY}",
    f'librdkafka: sasl.oauthbearer.config: password="{CANARY}"',
])
def test_secret_values_in_free_text_are_hidden(text):
    shown = redact_text(text)
    assert CANARY not in shown and HIDDEN in shown, shown


def test_free_text_keeps_what_is_not_secret():
    text = "ssl.key.location=/mnt/tls/key.pem 'topics': 'orders' spec.config.connection.password: not mounted"
    assert redact_text(text) == text
