"""A real RabbitMQ broker for tests, from the distribution's packages (Debian ``rabbitmq-server``).

Each :class:`RabbitMQServer` is a private node that never touches a system broker:

* a unique node name (``conveyor-<random>@localhost``) and its own Erlang cookie (``HOME`` is
  its temp dir);
* free ``127.0.0.1`` ports for AMQP, for Erlang distribution and for its own ``epmd`` (started
  by the harness in the foreground, so it is stopped with the node; a system ``epmd`` on 4369 is
  never used);
* data, logs, ``rabbitmq.conf``, ``rabbitmq-env.conf`` and an empty enabled-plugins file in the
  temp dir (no management plugin, nothing from ``/etc/rabbitmq`` or ``/var/lib/rabbitmq``);
* it runs as the current user (root is fine); the VM is the harness's direct child, in its own
  process group, dies with the Python process (``setpriv --pdeathsig``) and is recorded for
  reaping by the next run if something still goes wrong (:mod:`conveyor.testing._support`).

Typical use::

    from conveyor.testing.rabbitmq import RabbitMQServer

    with RabbitMQServer() as rabbit:                # about 4 s: boot, wait for an AMQP login
        rabbit.url                                  # amqp://guest:guest@127.0.0.1:PORT/%2F
        rabbit.queue_exists("orders")
        rabbit.ctl("list_queues", "name", "durable")   # rabbitmqctl against this node
        with rabbit.paused():                       # SIGSTOP: the broker answers nothing
            ...

``guest`` may only log in over loopback (RabbitMQ's default), which is what the harness uses.
:func:`start_or_reuse` returns an :class:`~conveyor.testing.rabbitmq_client.ExternalRabbitMQ` for ``$CONVEYOR_RABBITMQ_URL`` when
that is set, else a freshly started :class:`RabbitMQServer`; both share
:class:`~conveyor.testing.rabbitmq_client.RabbitMQEndpoint`'s interface (``ctl``, ``pause`` and ``restart`` need a harness-started
node). Failures to find, start or reach the broker raise
:class:`~conveyor.testing.errors.ComponentUnavailable` (component ``"rabbitmq"``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import signal
import string
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conveyor.testing import _support
from conveyor.testing.errors import ComponentUnavailable, reuse_or_start
from conveyor.testing.managed_server import ManagedServer
from conveyor.testing.rabbitmq_client import ENV_URL, ExternalRabbitMQ, RabbitMQEndpoint, load_pika

__all__ = [
    "ENV_HOME",
    "RabbitMQServer",
    "find_epmd",
    "find_server_script",
    "start_or_reuse",
]

log = logging.getLogger("conveyor.testing.rabbitmq")

#: Environment variable naming a RabbitMQ installation (a directory with ``sbin/rabbitmq-server``).
ENV_HOME = "CONVEYOR_RABBITMQ_HOME"
_INSTALL_HINT = f"apt-get install rabbitmq-server (or set {ENV_URL}=amqp://... to reuse a running broker)"
_DEBIAN_SCRIPT = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
_LOOPBACK_ERL = "{127,0,0,1}"


def find_server_script() -> Path:
    """The ``rabbitmq-server`` start script of the RabbitMQ installation to run.

    Order: ``$CONVEYOR_RABBITMQ_HOME/sbin`` (or ``/bin``); Debian's ``/usr/lib/rabbitmq/bin``;
    the newest ``/usr/lib/rabbitmq/lib/rabbitmq_server-*/sbin``; a ``rabbitmq-server`` on
    ``PATH`` that sits next to ``rabbitmq-env`` (a generic-unix install; Debian's
    ``/usr/sbin/rabbitmq-server`` wrapper, which switches to the system node's user, is not it).

    Raises:
        ComponentUnavailable: none found.
    """
    env = os.environ.get(ENV_HOME)
    if env:
        for sub in ("sbin", "bin"):
            if (Path(env) / sub / "rabbitmq-server").exists():
                return Path(env) / sub / "rabbitmq-server"
        raise ComponentUnavailable("rabbitmq", f"{ENV_HOME}={env} has no sbin/rabbitmq-server", hint=_INSTALL_HINT)
    if _DEBIAN_SCRIPT.exists():
        return _DEBIAN_SCRIPT
    versions = sorted(
        Path("/usr/lib/rabbitmq/lib").glob("rabbitmq_server-*/sbin/rabbitmq-server"),
        key=lambda p: tuple(int(x) for x in p.parent.parent.name.split("-")[-1].split(".") if x.isdigit()),
    )
    if versions:
        return versions[-1]
    on_path = shutil.which("rabbitmq-server")
    if on_path:
        real = Path(os.path.realpath(on_path))
        if (real.parent / "rabbitmq-env").exists():
            return real
    raise ComponentUnavailable(
        "rabbitmq", "RabbitMQ server not found (no /usr/lib/rabbitmq/bin/rabbitmq-server)", hint=_INSTALL_HINT
    )


def find_epmd() -> Path:
    """Erlang's port mapper daemon binary (``epmd``), from ``PATH`` or ``/usr/lib/erlang/bin``.

    Raises:
        ComponentUnavailable: Erlang is not installed.
    """
    found = shutil.which("epmd")
    if found:
        return Path(found)
    for cand in (Path("/usr/lib/erlang/bin/epmd"), *sorted(Path("/usr/lib/erlang").glob("erts-*/bin/epmd"))):
        if cand.exists():
            return cand
    raise ComponentUnavailable("rabbitmq", "Erlang's epmd not found (is Erlang installed?)", hint=_INSTALL_HINT)


class RabbitMQServer(ManagedServer, RabbitMQEndpoint):
    """A private RabbitMQ node on ``127.0.0.1:<free port>`` with its data in a fresh temp dir.

    Args:
        config: extra ``rabbitmq.conf`` lines (``{"key": "value"}``), overriding the defaults
            (loopback listener, ``disk_free_limit.absolute = 1MB`` so a small CI disk does not
            block publishers, console logging).
        startup_timeout: seconds to wait for an AMQP login.

    Attributes (while running): ``workdir``, ``amqp_port``, ``dist_port``, ``epmd_port``,
    ``nodename``, ``log_path`` (the node's console output), ``pid`` (the Erlang VM).

    Raises (from :meth:`start`):
        ComponentUnavailable: package missing, or the node did not come up (with its log tail).
    """

    log_name = "rabbitmq.log"
    process_name = "node"
    log_tail_lines = 30

    def __init__(self, *, config: Mapping[str, str] | None = None, startup_timeout: float = 60.0) -> None:
        self.config = dict(config or {})
        self.script: Path | None = None
        self.epmd: Path | None = None
        self.nodename: str | None = None
        self.amqp_port: int | None = None
        self.dist_port: int | None = None
        self.epmd_port: int | None = None
        self.startup_seconds: float | None = None
        self._epmd_proc: subprocess.Popen | None = None
        self._epmd_record: Path | None = None
        self._paused = False
        self._init_server(startup_timeout, port=None)  # its ports: amqp_port, dist_port, epmd_port

    # -- public ---------------------------------------------------------------------------------

    def start(self) -> RabbitMQServer:
        """Start epmd and the node, wait for an AMQP login. Retries with new ports (3 attempts)
        when a port was taken in between.

        Returns:
            self.

        Raises:
            ComponentUnavailable: see the class docstring.
        """
        if self._proc is not None:
            return self
        self.script = find_server_script()
        self.epmd = find_epmd()
        load_pika()
        self._start_with_port_retries(self._start_once, "eaddrinuse")
        return self

    def stop(self) -> None:
        """Stop the node (SIGTERM: a clean shutdown, SIGKILL after 30 s) and its epmd, remove
        the temp dir. Idempotent."""
        self._stop_node()
        epmd, self._epmd_proc = self._epmd_proc, None
        if epmd is not None:
            _support.stop_process(epmd, grace=5.0)
        _support.unregister_child(self._epmd_record)
        self._epmd_record = None
        self._discard()
        self._url = None

    def restart(self) -> None:
        """Stop the node cleanly and start it again: same node name, ports and data (durable
        queues and persistent messages survive). Clients are disconnected.

        Raises:
            ComponentUnavailable: the node did not come back.
        """
        if self.workdir is None:
            raise RuntimeError("RabbitMQServer is not started")
        self._stop_node()
        self._launch_node()
        self.wait_ready(self.startup_timeout)

    def ctl(self, *args: str, timeout: float = 60.0) -> str:
        """Run ``rabbitmqctl -q -n <node> <args>`` (e.g. ``"close_all_connections", "test"``,
        ``"set_policy", ...``, ``"list_queues", "name", "durable"``) and return stdout.

        Raises:
            RuntimeError: rabbitmqctl failed (its output in the message).
        """
        if self.workdir is None or self.script is None:
            raise RuntimeError("RabbitMQServer is not started")
        env = self._env()
        port = str(_support.free_port())
        env.update(
            RABBITMQ_CTL_DIST_PORT_MIN=port,
            RABBITMQ_CTL_DIST_PORT_MAX=port,
            RABBITMQ_CTL_ERL_ARGS=f"-kernel inet_dist_use_interface {_LOOPBACK_ERL}",
        )
        out = subprocess.run(
            [str(self.script.parent / "rabbitmqctl"), "-q", "-n", str(self.nodename), *args],
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            cwd=self.workdir,
            env=env,
        )
        if out.returncode != 0:
            raise RuntimeError(
                f"rabbitmqctl {' '.join(args)} failed (exit {out.returncode}): {(out.stderr or out.stdout).strip()}"
            )
        return out.stdout

    def pause(self) -> None:
        if self._proc is None:
            raise RuntimeError("RabbitMQServer is not started")
        os.kill(self._proc.pid, signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        if self._proc is not None and self._paused:
            os.kill(self._proc.pid, signal.SIGCONT)
        self._paused = False

    def __repr__(self) -> str:
        return f"RabbitMQServer(url={self._url!r}, node={self.nodename!r}, pid={self.pid})"

    # -- internals ------------------------------------------------------------------------------

    def _conf(self) -> str:
        assert self.amqp_port
        settings = {
            "listeners.tcp.default": f"{_support.LOOPBACK}:{self.amqp_port}",
            "loopback_users.guest": "true",
            "disk_free_limit.absolute": "1MB",
            "log.console": "true",
            "log.console.level": "info",
            "log.file": "false",
        }
        settings.update(self.config)
        return "".join(f"{k} = {v}\n" for k, v in settings.items())

    def _env(self) -> dict[str, str]:
        assert self.workdir and self.nodename
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        env.pop("NOTIFY_SOCKET", None)  # would make the script think it runs under systemd
        w = self.workdir
        env.update(
            HOME=str(w),  # the Erlang cookie lives here
            LANG="C.UTF-8",
            LC_ALL="C.UTF-8",
            RABBITMQ_NODENAME=self.nodename,
            RABBITMQ_NODE_IP_ADDRESS=_support.LOOPBACK,
            RABBITMQ_NODE_PORT=str(self.amqp_port),
            RABBITMQ_DIST_PORT=str(self.dist_port),
            ERL_EPMD_PORT=str(self.epmd_port),
            ERL_EPMD_ADDRESS=_support.LOOPBACK,
            RABBITMQ_MNESIA_BASE=str(w / "mnesia"),
            RABBITMQ_LOG_BASE=str(w / "log"),
            RABBITMQ_LOGS="-",
            RABBITMQ_CONFIG_FILE=str(w / "rabbitmq.conf"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(w / "advanced.config"),
            RABBITMQ_CONF_ENV_FILE=str(w / "rabbitmq-env.conf"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(w / "enabled_plugins"),
        )
        return env

    def _start_once(self) -> None:
        self.workdir = w = Path(tempfile.mkdtemp(prefix="conveyor-rabbitmq-"))
        self.nodename = f"conveyor-{secrets.token_hex(4)}@localhost"
        self.amqp_port = _support.free_port()
        self.dist_port = _support.free_port()
        self.epmd_port = _support.free_port()
        (w / "mnesia").mkdir()
        (w / "log").mkdir()
        (w / "rabbitmq.conf").write_text(self._conf())
        (w / "rabbitmq-env.conf").write_text("# empty: keeps /etc/rabbitmq/rabbitmq-env.conf out\n")
        (w / "enabled_plugins").write_text("[].\n")
        cookie = w / ".erlang.cookie"
        cookie.write_text("".join(secrets.choice(string.ascii_uppercase) for _ in range(32)))
        cookie.chmod(0o400)
        # epmd in the foreground, as our child: the VM would otherwise start a daemonised one that
        # outlives it. Run through a symlink in the temp dir so its command line names the temp
        # dir (that is how the reaper recognises it).
        (w / "epmd").symlink_to(self.epmd)  # type: ignore[arg-type]
        with open(w / "epmd.log", "wb") as out:
            self._epmd_proc = subprocess.Popen(
                [
                    *_support.pdeathsig_prefix("KILL"),
                    str(w / "epmd"),
                    "-port",
                    str(self.epmd_port),
                    "-address",
                    _support.LOOPBACK,
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=w,
                env=self._env(),
                start_new_session=True,
            )
        self._epmd_record = _support.register_child("rabbitmq-epmd", self._epmd_proc.pid, w)
        _support.track(self)
        deadline = time.monotonic() + 10
        while not _support.port_open(_support.LOOPBACK, self.epmd_port):
            if self._epmd_proc.poll() is not None or time.monotonic() > deadline:
                raise ComponentUnavailable(
                    "rabbitmq",
                    f"epmd ({self.epmd}) did not listen on {_support.LOOPBACK}:{self.epmd_port}",
                    log_tail=_support.tail(w / "epmd.log", 20),
                )
            time.sleep(0.05)
        started = time.monotonic()
        self._launch_node()
        self._url = f"amqp://guest:guest@{_support.LOOPBACK}:{self.amqp_port}/%2F"
        self.wait_ready(self.startup_timeout)
        self.startup_seconds = time.monotonic() - started
        log.info("RabbitMQ node %s ready on %s in %.1fs", self.nodename, self._url, self.startup_seconds)

    def _launch_node(self) -> None:
        assert self.workdir and self.script
        env = self._env()
        env.update(
            # The script then execs erl instead of running it under a signal-forwarding shell: our
            # child *is* the VM, so setpriv's parent-death signal and our SIGTERM reach it.
            # (-noinput, which the script drops in that mode, is passed below.)
            RABBITMQ_ALLOW_INPUT="1",
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=f"-kernel inet_dist_use_interface {_LOOPBACK_ERL}",
        )
        cmd = [*_support.pdeathsig_prefix("KILL"), str(self.script), "-noinput", "-conveyor_workdir", str(self.workdir)]
        with open(self.workdir / self.log_name, "ab") as out:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=env,
                start_new_session=True,
            )
        self._record = _support.register_child("rabbitmq", self._proc.pid, self.workdir)
        _support.track(self)

    def _stop_node(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if self._paused:
                with contextlib.suppress(OSError):
                    os.kill(proc.pid, signal.SIGCONT)
                self._paused = False
            _support.stop_process(proc, first_signal=signal.SIGTERM, grace=30.0)
        _support.unregister_child(self._record)
        self._record = None

    def _where(self) -> str:
        return f"RabbitMQ node {self.nodename} ({self.script}) on {_support.LOOPBACK}:{self.amqp_port}"

    def _first_error(self, log_text: str) -> str:
        return _first_errors(log_text)


def _first_errors(log_text: str, limit: int = 3) -> str:
    """The first ``limit`` non-empty ``[error]`` messages of a node log, joined (the boot
    failure's reason comes first; the crash report that follows is long)."""
    found: list[str] = []
    for line in log_text.splitlines():
        if "[error]" not in line:
            continue
        message = line.split("> ", 1)[-1].strip() if "> " in line else ""
        if message:
            found.append(message)
        if len(found) >= limit:
            break
    return " / ".join(found)


def start_or_reuse(*, env: Mapping[str, str] | None = None, **server_kwargs: Any) -> RabbitMQEndpoint:
    """The broker for a test session: reuse ``$CONVEYOR_RABBITMQ_URL`` if set, else start one.

    Returns:
        A reachable :class:`ExternalRabbitMQ` or a started :class:`RabbitMQServer` (call
        ``stop()`` when done; a no-op for the external one).

    Raises:
        ComponentUnavailable: the reused broker does not answer within 30 s, or starting failed.
    """
    return reuse_or_start(env, ENV_URL, ExternalRabbitMQ, lambda: RabbitMQServer(**server_kwargs).start())
