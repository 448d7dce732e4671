"""An arbitrary UID gets a passwd entry for the JVM through libnss_wrapper (OpenShift's case)."""

from __future__ import annotations

import os
from pathlib import Path

from conveyor.runtime.driver import passwd_entry


def _unknown_uid(monkeypatch):
    def missing(uid):
        raise KeyError(uid)
    monkeypatch.setattr(passwd_entry.pwd, "getpwuid", missing)


def test_a_known_uid_changes_nothing():
    env: dict[str, str] = {}
    assert passwd_entry.ensure_passwd_entry(env) is False and env == {}


def test_an_unknown_uid_gets_an_entry_and_the_wrapper(monkeypatch, tmp_path):
    _unknown_uid(monkeypatch)
    monkeypatch.setattr(passwd_entry.glob, "glob", lambda pattern: ["/usr/lib/x86_64-linux-gnu/libnss_wrapper.so"])
    env = {"LD_PRELOAD": "libother.so"}
    assert passwd_entry.ensure_passwd_entry(env, tmp_path) is True
    assert env["LD_PRELOAD"] == "libother.so /usr/lib/x86_64-linux-gnu/libnss_wrapper.so"
    lines = Path(env["NSS_WRAPPER_PASSWD"]).read_text().splitlines()
    assert lines[-1] == f"conveyor:x:{os.getuid()}:{os.getgid()}:conveyor:/tmp:/bin/false"
    assert env["NSS_WRAPPER_GROUP"] == "/etc/group"


def test_without_the_library_it_says_so_and_changes_nothing(monkeypatch, tmp_path, caplog):
    _unknown_uid(monkeypatch)
    monkeypatch.setattr(passwd_entry.glob, "glob", lambda pattern: [])
    env: dict[str, str] = {}
    assert passwd_entry.ensure_passwd_entry(env, tmp_path) is False and env == {}
    assert "libnss_wrapper is not installed" in caplog.text
