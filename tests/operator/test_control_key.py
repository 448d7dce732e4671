"""The operator's key and what it derives (conveyor_operator.reconcile.control_key): values the operator can
compute again instead of reading a Secret, new for a new Connector, key or rotation."""

from __future__ import annotations

import re

import pytest
from conveyor_operator.reconcile.control_key import ConnectorIdentity, OperatorKey, OperatorKeyError
from conveyor_operator.reconcile.control_secret import KEYS, control_secret

ORDERS = ConnectorIdentity("team-a", "orders", "6f1c0a52-0d6e-4d8e-9d7e-0c1b2a3d4e5f")


def test_values_are_computed_again_alike_and_differ_by_purpose():
    key = OperatorKey(b"k" * 32)
    values = [key.derive(purpose, ORDERS) for purpose in KEYS]
    assert values == [OperatorKey(b"k" * 32).derive(purpose, ORDERS) for purpose in KEYS]
    assert len(set(values)) == len(KEYS)
    assert all(re.fullmatch(r"[-_A-Za-z0-9]{43}", value) for value in values)


@pytest.mark.parametrize("other", [
    ConnectorIdentity("team-a", "orders", "another-uid"),                 # re-created under the same name
    ConnectorIdentity("team-a", "orders", ORDERS.uid, rotation="1"),     # rotated
    ConnectorIdentity("team-b", "orders", ORDERS.uid),
    ConnectorIdentity("team-a", "orders2", ORDERS.uid),
])
def test_another_connector_or_rotation_gets_other_values_and_another_version(other):
    key = OperatorKey(b"k" * 32)
    assert key.derive("admin-token", other) != key.derive("admin-token", ORDERS)
    if (other.uid, other.rotation) != (ORDERS.uid, ORDERS.rotation):
        assert key.version(other) != key.version(ORDERS)


def test_another_key_gives_other_values_another_version_and_key_id():
    one, two = OperatorKey(b"k" * 32), OperatorKey(b"j" * 32)
    assert one.derive("admin-token", ORDERS) != two.derive("admin-token", ORDERS)
    assert one.version(ORDERS) != two.version(ORDERS)
    assert one.key_id != two.key_id and re.fullmatch(r"[0-9a-f]{12}", one.key_id)


def test_the_secret_body_holds_the_derived_values_and_reveals_no_key():
    key = OperatorKey(b"k" * 32)
    owner = {"apiVersion": "conveyor.dev/v1alpha1", "kind": "Connector", "name": "orders", "uid": ORDERS.uid}
    body = control_secret(key, ORDERS, owner)
    assert body["metadata"]["name"] == "orders-control" and body["metadata"]["ownerReferences"] == [owner]
    assert body["stringData"] == {purpose: key.derive(purpose, ORDERS) for purpose in KEYS}
    assert body["metadata"]["annotations"] == {"conveyor.dev/control-secret-version": key.version(ORDERS)}
    assert "k" * 32 not in repr(body)


def test_the_key_file_is_read_stripped_and_refused_when_short_or_missing(tmp_path):
    path = tmp_path / "key"
    path.write_bytes(b"x" * 40 + b"\n")
    assert OperatorKey.load(str(path)).key_id == OperatorKey(b"x" * 40).key_id
    path.write_bytes(b"short\n")
    with pytest.raises(OperatorKeyError, match="5 bytes; at least 32"):
        OperatorKey.load(str(path))
    with pytest.raises(OperatorKeyError, match="No such file"):
        OperatorKey.load(str(tmp_path / "absent"))


def test_without_a_key_file_each_process_draws_its_own_key(caplog):
    assert OperatorKey.load("").key_id != OperatorKey.load("").key_id
    assert "CONVEYOR_OPERATOR_KEY_FILE is unset" in caplog.text
