"""Harness ports come from outside the kernel's ephemeral range, so a component restarted on its
port never finds an outgoing connection's local end sitting there."""

from __future__ import annotations

import socket

from conveyor.testing import ports


def test_the_ephemeral_range_is_read_from_the_kernel_file(tmp_path):
    path = tmp_path / "ip_local_port_range"
    path.write_text("40000\t50000\n")
    assert ports.ephemeral_range(path) == (40000, 50000)


def test_an_unreadable_or_nonsensical_range_falls_back_to_linux_default(tmp_path):
    assert ports.ephemeral_range(tmp_path / "missing") == (32768, 60999)
    bad = tmp_path / "bad"
    bad.write_text("50000 40000\n")
    assert ports.ephemeral_range(bad) == (32768, 60999)


def test_candidates_avoid_the_ephemeral_range_and_kubernetes_node_ports():
    ranges = ports.candidate_ranges((32768, 60999))
    assert ranges == [range(10000, 30000), range(61000, 65536)]
    assert ports.candidate_ranges((20000, 40000)) == [range(40001, 65536), range(10000, 20000)]
    assert ports.candidate_ranges((1024, 65535)) == []


def test_a_free_port_is_outside_the_ephemeral_range_and_bindable():
    low, high = ports.ephemeral_range()
    for _ in range(20):
        port = ports.free_port()
        assert not low <= port <= high
        assert not 30000 <= port < 32768
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_held_port_is_never_chosen(monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held_port = held.getsockname()[1]
        monkeypatch.setattr(ports, "candidate_ranges", lambda _eph: [range(held_port, held_port + 1)])
        chosen = ports.free_port()
    assert chosen != held_port
