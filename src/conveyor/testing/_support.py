"""Private plumbing shared by the harness modules: cache dir, ports, Java, child processes.

Nothing here is public API. The important guarantees live here:

* every child process (Kafka JVM, postgres) runs in its own session/process group, so it can be
  stopped as a whole and a Ctrl-C on the terminal does not kill it behind the harness's back;
* when started from the main thread it is launched through ``setpriv --pdeathsig`` (util-linux),
  so it dies with the Python process even on ``kill -9``;
* every live component is stopped by an ``atexit`` hook, in reverse start order;
* every child is recorded in ``<cache>/run/*.json``; the next start of any component reaps the
  children (and temp dirs) of owners that are gone, so a crashed run never breaks the next one.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from conveyor.testing import ports
from conveyor.testing.errors import ComponentUnavailable

log = logging.getLogger("conveyor.testing")

LOOPBACK = "127.0.0.1"


# --------------------------------------------------------------------------------------------
# cache dir, ports, logs


def cache_root() -> Path:
    """Root of the harness cache: ``$CONVEYOR_CACHE_DIR``, else ``~/.cache/conveyor``.

    ``$XDG_CACHE_HOME/conveyor`` is used instead of ``~/.cache/conveyor`` when XDG_CACHE_HOME is set.
    The directory is created if missing.
    """
    env = os.environ.get("CONVEYOR_CACHE_DIR")
    if env:
        root = Path(env).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = Path(base).expanduser() / "conveyor"
    root.mkdir(parents=True, exist_ok=True)
    return root


free_port = ports.free_port


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """True if a TCP connection to ``host:port`` succeeds within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def outside_test_timeout() -> Iterator[None]:
    """Pause pytest-timeout's per-test alarm (its ``signal`` method: ``ITIMER_REAL``) for a
    one-off preparation that has its own bound, such as building the Kubernetes binaries or the
    images on a fresh machine inside the first test that needs them; the test gets the rest of
    its time back afterwards. Outside the main thread, or with no alarm set, it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    left, _ = signal.getitimer(signal.ITIMER_REAL)
    if left:
        signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        yield
    finally:
        if left:
            signal.setitimer(signal.ITIMER_REAL, left)


def run_build(cmd: list[str], log_path: Path, *, env: dict[str, str], timeout_s: float,
              what: str, component: str, hint: str = "", progress: str = "", stage: str = "") -> None:
    """Run a long build step (``cmd``, output appended to ``log_path``) outside the test's
    timeout (:func:`outside_test_timeout`) and in its own process group, which is killed
    whole (the build tool's children too, e.g. ``go``'s compilers) when it overruns
    ``timeout_s`` or the caller is interrupted. With ``progress``, reports under that name
    every 30 s (:func:`progress_while`, with ``stage``).

    Raises:
        ComponentUnavailable: it exited non-zero or did not finish in ``timeout_s``; the
            message names ``what`` and carries the log's tail.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    reporting = progress_while(progress, log_path, stage=stage) if progress else contextlib.nullcontext()
    with outside_test_timeout(), reporting, open(log_path, "ab") as log_file:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log_file, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
        try:
            returncode = proc.wait(timeout=timeout_s)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            if isinstance(sys.exc_info()[1], subprocess.TimeoutExpired):
                raise ComponentUnavailable(component, f"{what} did not finish in {timeout_s:.0f} s",
                                           log_tail=tail(log_path, 30), hint=hint or f"log: {log_path}") from None
            raise
    if returncode != 0:
        raise ComponentUnavailable(component, f"{what} failed (exit {returncode})", log_tail=tail(log_path, 30),
                                   hint=hint or f"log: {log_path}")


@contextlib.contextmanager
def progress_while(what: str, log_path: Path, *, every_s: float = 30.0, stage: str = "") -> Iterator[None]:
    """While the block runs, print ``conveyor.testing: ... <what>: <elapsed>[, <stage>], now: <the
    last line of log_path>`` to the terminal (``sys.__stderr__``) every ``every_s`` seconds, so a
    long cold step (a Go build, an image build) shows it is moving and what it is doing. With
    ``stage`` (a line prefix), the log's last line starting with it is shown too, without the
    prefix (e.g. which binary a build script is on, while the compiler names packages)."""
    done = threading.Event()
    terminal = sys.__stderr__ or sys.stderr
    began = time.monotonic()

    def report() -> None:
        offset, current, last = 0, "", ""
        while not done.wait(every_s):
            with contextlib.suppress(OSError), open(log_path, "rb") as log_file:
                log_file.seek(offset)
                chunk = log_file.read()
                cut = chunk.rfind(b"\n") + 1  # whole lines only; the rest is read next time
                offset += cut
                for line in chunk[:cut].decode("utf-8", "replace").splitlines():
                    line = line.strip()
                    if stage and line.startswith(stage):
                        current = line[len(stage):].strip()
                    elif line:
                        last = line
            minutes, seconds = divmod(int(time.monotonic() - began), 60)
            shown = "".join(f", {part[:110]}" for part in (current, last and f"now: {last}") if part)
            print(f"conveyor.testing: ... {what}: {minutes}m{seconds:02d}s{shown}", file=terminal, flush=True)

    reporter = threading.Thread(target=report, name=f"progress {what}", daemon=True)
    reporter.start()
    try:
        yield
    finally:
        done.set()
        reporter.join()


def tail(path: Path | str, lines: int = 40) -> str:
    """Last ``lines`` lines of a text file ("" if it does not exist); reads at most 64 KiB."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 65536))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def preserve_log(path: Path | str | None, kind: str, keep: int = 20) -> Path | None:
    """Copy a failing component's log to ``<cache>/logs/<kind>-<time>-<pid>.log`` (its temp dir
    is about to be removed) and return the copy; keeps the newest ``keep`` copies. Never raises."""
    if path is None or not Path(path).is_file():
        return None
    try:
        logs = cache_root() / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        dest = logs / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
        shutil.copyfile(path, dest)
        old = sorted(logs.glob(f"{kind}-*.log"), key=lambda p: p.stat().st_mtime)
        for p in old[:-keep]:
            p.unlink(missing_ok=True)
        return dest
    except OSError:
        return None


_ERROR_LINE_RE = re.compile(r"(Exception|Error|ERROR|FATAL|PANIC)\b")


def first_error_line(text: str) -> str:
    """The first line of ``text`` that looks like an error (exception, ERROR/FATAL), or ""."""
    for line in text.splitlines():
        if _ERROR_LINE_RE.search(line) and not line.lstrip().startswith("at "):
            return line.strip()
    return ""


# --------------------------------------------------------------------------------------------
# Java


_JAVA_VERSION_RE = re.compile(r'version "(\d+)(?:\.(\d+))?')


def java_major_version(java: Path) -> int | None:
    """Major version of the ``java`` executable (17 for "17.0.15"), or None if it does not run."""
    try:
        out = subprocess.run(
            [str(java), "-version"], check=False, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = _JAVA_VERSION_RE.search(out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0_xxx"
        major = int(m.group(2))
    return major


def find_java_home(min_version: int = 17, *, component: str = "java") -> Path:
    """Locate a JDK/JRE home with ``bin/java`` of at least ``min_version``.

    Search order: ``$JAVA_HOME`` (used as is if set: a wrong one is an error, not silently
    replaced), then ``/usr/lib/jvm/java-<min_version>-*`` (Debian's openjdk packages), then the
    ``java`` found on ``PATH``, then any other ``/usr/lib/jvm/*`` that is recent enough.

    Raises:
        ComponentUnavailable: no suitable Java (names ``component`` as the unavailable one).
    """
    hint = "apt-get install openjdk-17-jdk-headless (or set JAVA_HOME to a Java 17+ home)"
    env = os.environ.get("JAVA_HOME")
    if env:
        java = Path(env) / "bin" / "java"
        v = java_major_version(java)
        if v is None:
            raise ComponentUnavailable(component, f"JAVA_HOME={env} has no working bin/java", hint=hint)
        if v < min_version:
            raise ComponentUnavailable(component, f"JAVA_HOME={env} is Java {v}; Java {min_version}+ is needed", hint=hint)
        return Path(env)

    candidates: list[Path] = []
    jvm = Path("/usr/lib/jvm")
    if jvm.is_dir():
        candidates += sorted(jvm.glob(f"java-{min_version}-*"))
    on_path = shutil.which("java")
    if on_path:
        candidates.append(Path(os.path.realpath(on_path)).parent.parent)
    if jvm.is_dir():
        candidates += sorted((p for p in jvm.iterdir() if p.is_dir()), reverse=True)
    seen: set[Path] = set()
    found: list[str] = []
    for home in candidates:
        home = Path(os.path.realpath(home))
        if home in seen or not (home / "bin" / "java").exists():
            continue
        seen.add(home)
        v = java_major_version(home / "bin" / "java")
        found.append(f"{home} (Java {v})")
        if v is not None and v >= min_version:
            return home
    why = f"no Java {min_version}+ found (JAVA_HOME unset; looked in /usr/lib/jvm and PATH"
    why += f"; found: {', '.join(found)})" if found else ")"
    raise ComponentUnavailable(component, why, hint=hint)


# --------------------------------------------------------------------------------------------
# child processes


class Stoppable(Protocol):
    def stop(self) -> None: ...


_live: list[Stoppable] = []
_live_lock = threading.Lock()


def track(component: Stoppable) -> None:
    """Remember a started component so the atexit hook stops it if nobody else does."""
    with _live_lock:
        _live.append(component)


def untrack(component: Stoppable) -> None:
    with _live_lock, contextlib.suppress(ValueError):
        _live.remove(component)


@atexit.register
def _stop_all_at_exit() -> None:
    while True:
        with _live_lock:
            if not _live:
                return
            component = _live.pop()
        try:
            component.stop()
        except Exception:
            log.exception("stopping %r at exit failed", component)


def pdeathsig_prefix(signame: str = "KILL") -> list[str]:
    """Command prefix making the child die when this process dies (Linux ``setpriv``).

    Only used from the main thread: the kernel ties the parent-death signal to the *thread* that
    forked, and a worker thread may end long before the process does. Empty list otherwise or
    when ``setpriv`` is not installed.
    """
    if threading.current_thread() is not threading.main_thread():
        return []
    setpriv = shutil.which("setpriv")
    if not setpriv:
        return []
    return [setpriv, f"--pdeathsig={signame}", "--"]


def _starttime(pid: int) -> str | None:
    """Start time (clock ticks since boot) of ``pid`` from /proc, None if it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # field 2 (comm) may contain spaces; it is enclosed in parentheses
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _run_dir() -> Path | None:
    try:
        d = cache_root() / "run"
        d.mkdir(parents=True, exist_ok=True)
        return d
    except OSError:
        return None


def register_child(kind: str, pid: int, workdir: Path) -> Path | None:
    """Record a child (``kind`` e.g. "kafka", its ``pid``, its temp ``workdir``) for reaping.

    The child's command line must contain ``str(workdir)``: that is how a reaper tells the
    recorded process from an unrelated one that reused the pid. Returns the record file.
    """
    d = _run_dir()
    if d is None:
        return None
    record = d / f"{kind}-{pid}.json"
    data = {
        "kind": kind,
        "pid": pid,
        "workdir": str(workdir),
        "owner_pid": os.getpid(),
        "owner_start": _starttime(os.getpid()),
    }
    try:
        record.write_text(json.dumps(data))
    except OSError:
        return None
    return record


def unregister_child(record: Path | None) -> None:
    if record is not None:
        with contextlib.suppress(OSError):
            record.unlink()


def reap_stale() -> list[str]:
    """Kill children recorded by owners that no longer exist and delete their temp dirs.

    Returns a description of each reaped record. Never raises.
    """
    reaped: list[str] = []
    if not Path("/proc/self/stat").exists():  # liveness checks need Linux's /proc
        return reaped
    d = _run_dir()
    if d is None:
        return reaped
    for record in d.glob("*.json"):
        try:
            data = json.loads(record.read_text())
            owner, owner_start = int(data["owner_pid"]), data.get("owner_start")
            if _starttime(owner) is not None and _starttime(owner) == owner_start:
                continue  # owner still alive
            pid, workdir = int(data["pid"]), str(data["workdir"])
            if _starttime(pid) is not None and workdir in _cmdline(pid):
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                for _ in range(50):
                    if _starttime(pid) is None or _state(pid) == "Z":
                        break
                    time.sleep(0.1)
            if workdir and Path(workdir).name.startswith("conveyor-"):
                shutil.rmtree(workdir, ignore_errors=True)
            record.unlink()
            reaped.append(f"{data['kind']} pid {pid} ({workdir})")
        except (OSError, ValueError, KeyError, TypeError):
            with contextlib.suppress(OSError):
                record.unlink()
    for what in reaped:
        log.warning("reaped leftover %s of a previous run", what)
    return reaped


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat[stat.rfind(")") + 2 :].split()[0]


def stop_process(proc: subprocess.Popen, *, first_signal: int = signal.SIGTERM, grace: float = 30.0) -> None:
    """Stop ``proc`` (started with ``start_new_session=True``): ``first_signal`` to the process,
    wait up to ``grace`` seconds, then SIGKILL its whole process group. Never raises."""
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.send_signal(first_signal)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            log.warning("pid %s did not stop within %.0fs of signal %s; killing it", proc.pid, grace, first_signal)
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)  # leftovers in the group (postgres backends, ...)
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


def start_with_port_retries(start_once: Callable[[], None], stop: Callable[[], None], port_clash: str,
                            component: str, attempts: int = 3) -> None:
    """Run ``start_once`` (which picks fresh free ports each time), retrying when it fails
    because a port was taken between choosing and binding it: a ``ComponentUnavailable``
    whose log tail contains ``port_clash`` (case-insensitive). ``stop`` runs after every
    failed attempt.

    Raises:
        ComponentUnavailable: any other failure, or a clash on the last attempt.
    """
    for attempt in range(attempts):
        try:
            start_once()
            return
        except ComponentUnavailable as e:
            stop()
            if port_clash.lower() not in e.log_tail.lower() or attempt == attempts - 1:
                raise
            log.warning("%s: port clash, retrying with new ports", component)
        except BaseException:
            stop()
            raise
