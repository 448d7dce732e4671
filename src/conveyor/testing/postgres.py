"""A real PostgreSQL server for tests, from the distribution's packages (Debian ``postgresql``).

The newest ``/usr/lib/postgresql/<version>/bin`` is used (override with ``$CONVEYOR_PG_BINDIR``;
``pg_config --bindir`` / ``initdb`` on ``PATH`` are the fallbacks). PostgreSQL refuses to run as
root, so when the harness runs as root the server runs as the ``postgres`` OS user (created by
the Debian package), with its data in a fresh temp dir owned by that user.

Typical use::

    from conveyor.testing.postgres import PostgresServer

    with PostgresServer() as pg:                    # initdb, start, CREATE DATABASE conveyor
        pg.url                                      # postgresql://postgres@127.0.0.1:PORT/conveyor
        other = pg.create_database("scratch")       # URL of a new database

:func:`start_or_reuse` returns an :class:`ExternalPostgres` for ``$CONVEYOR_POSTGRES_URL`` when
that is set, else a freshly started :class:`PostgresServer`. Both share
:class:`PostgresEndpoint`'s interface.

SQL is sent with psycopg (v3) when importable, else with ``psql``. Failures to find, start or
reach the server raise :class:`~conveyor.testing.errors.ComponentUnavailable` (component
``"postgres"``).
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from conveyor.testing import _support
from conveyor.testing.errors import ComponentUnavailable, Endpoint, reuse_or_start
from conveyor.testing.managed_server import ManagedServer

__all__ = [
    "ENV_URL",
    "ExternalPostgres",
    "PostgresEndpoint",
    "PostgresServer",
    "find_bindir",
    "start_or_reuse",
]

#: Environment variable with the libpq URL of a database on an already running server to reuse.
ENV_URL = "CONVEYOR_POSTGRES_URL"
_INSTALL_HINT = "apt-get install postgresql (or set CONVEYOR_PG_BINDIR to a PostgreSQL bin directory)"
_DBNAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def find_bindir() -> Path:
    """Directory with the PostgreSQL server binaries (``initdb``, ``postgres``, ``pg_isready``).

    Order: ``$CONVEYOR_PG_BINDIR``; the highest ``/usr/lib/postgresql/<version>/bin``;
    ``pg_config --bindir``; the directory of ``initdb`` on ``PATH``.

    Raises:
        ComponentUnavailable: none found.
    """
    env = os.environ.get("CONVEYOR_PG_BINDIR")
    if env:
        if (Path(env) / "initdb").exists():
            return Path(env)
        raise ComponentUnavailable("postgres", f"CONVEYOR_PG_BINDIR={env} has no initdb", hint=_INSTALL_HINT)

    def version_key(p: Path) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", p.parent.name)) or (0,)

    debian = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()]
    if debian:
        return max(debian, key=version_key)
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], check=False, capture_output=True, text=True)
        cand = Path(out.stdout.strip())
        if out.returncode == 0 and (cand / "initdb").exists():
            return cand
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise ComponentUnavailable(
        "postgres", "PostgreSQL server binaries not found (no /usr/lib/postgresql/*/bin/initdb)", hint=_INSTALL_HINT
    )


def with_database(url: str, dbname: str) -> str:
    """``url`` with its database (path) replaced by ``dbname``; credentials and query kept."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + quote(dbname, safe="")))


def _check_dbname(name: str) -> str:
    if not _DBNAME_RE.match(name):
        raise ValueError(f"database name {name!r} must match {_DBNAME_RE.pattern}")
    return name


class PostgresEndpoint(Endpoint):
    """A reachable PostgreSQL server plus a database on it (:attr:`url`).

    Usable as a context manager; ``__exit__`` calls :meth:`stop`.
    """

    component = "postgres"

    _url: str | None = None

    @property
    def url(self) -> str:
        """libpq URL of this endpoint's main database, e.g. ``postgresql://postgres@127.0.0.1:5432/conveyor``."""
        if not self._url:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._url

    @property
    def admin_url(self) -> str:
        """URL of the ``postgres`` maintenance database on the same server (same credentials)."""
        return with_database(self.url, "postgres")

    def execute(self, sql: str, *, url: str | None = None) -> None:
        """Run ``sql`` in autocommit mode against ``url`` (default :attr:`admin_url`).

        Raises:
            RuntimeError: the statement failed (message from the server).
        """
        _execute(url or self.admin_url, sql)

    def create_database(self, name: str) -> str:
        """Create database ``name`` (``[A-Za-z_][A-Za-z0-9_]*``, at most 63 chars) and return its URL.

        Raises:
            ValueError: bad name.
            RuntimeError: the server refused (e.g. it already exists).
        """
        self.execute(f'CREATE DATABASE "{_check_dbname(name)}"')
        return with_database(self.url, name)

    def drop_database(self, name: str) -> None:
        """Drop database ``name`` if it exists, disconnecting its sessions (``WITH (FORCE)``)."""
        self.execute(f'DROP DATABASE IF EXISTS "{_check_dbname(name)}" WITH (FORCE)')

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until ``SELECT 1`` succeeds on :attr:`url`.

        Raises:
            ComponentUnavailable: not within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            try:
                _execute(self.url, "SELECT 1")
                return
            except RuntimeError as e:
                if time.monotonic() >= deadline:
                    raise self._unavailable(f"`SELECT 1` did not succeed within {timeout:.0f}s: {e}") from None
            time.sleep(0.2)

class ExternalPostgres(PostgresEndpoint):
    """A PostgreSQL server someone else runs; ``url`` is a database on it. Never stopped by us.

    The URL's user must be allowed to ``CREATE DATABASE`` for :meth:`create_database`.
    """

    def __init__(self, url: str) -> None:
        url = url.strip()
        if not url.startswith(("postgresql://", "postgres://")):
            raise ComponentUnavailable("postgres", f"{ENV_URL} must be a postgresql:// URL, got {url!r}")
        self._url = url

    def _unavailable(self, reason: str) -> ComponentUnavailable:
        return ComponentUnavailable(
            "postgres", f"the reused server {ENV_URL}={self._url} is not usable: {reason}",
            hint=f"unset {ENV_URL} to let the harness start PostgreSQL, or start one with "
                 "`python -m conveyor.testing up --postgres`",
        )

    def __repr__(self) -> str:
        return f"ExternalPostgres({self._url!r})"


class PostgresServer(ManagedServer, PostgresEndpoint):
    """A real PostgreSQL server on 127.0.0.1:<free port>, trust auth, in a fresh temp dir.

    Tuned for tests, not durability: ``fsync=off``, ``synchronous_commit=off``,
    ``full_page_writes=off``. ``wal_level=logical`` so change-data-capture tests can use
    replication slots. The unix socket lives in the temp dir (no /var/run/postgresql needed).

    Args:
        database: database created at start; :attr:`url` points at it.
        settings: extra/overriding server settings (``-c name=value``).
        startup_timeout: seconds to wait for the server to accept connections.
        host: the one address the server listens on (``listen_addresses``).
        client_cidrs: networks admitted by ``pg_hba.conf`` besides the local ones (``trust``),
            e.g. a test node's pod CIDR; ``host`` itself is admitted too when any is given.

    Raises (from :meth:`start`):
        ComponentUnavailable: binaries missing, no ``postgres`` OS user while running as root,
            initdb or startup failed.
    """

    log_name = "postgres.log"
    process_name = "server process"
    stop_signal = signal.SIGINT  # a fast shutdown
    stop_grace_s = 30.0
    log_tail_lines = 30

    def __init__(
        self,
        database: str = "conveyor",
        *,
        settings: Mapping[str, str] | None = None,
        startup_timeout: float = 60.0,
        host: str = _support.LOOPBACK,
        client_cidrs: Sequence[str] = (),
    ) -> None:
        self.host = host
        self.client_cidrs = tuple(client_cidrs)
        self.database = _check_dbname(database)
        self.settings = dict(settings or {})
        self.bindir: Path | None = None
        self._init_server(startup_timeout)

    def start(self) -> PostgresServer:
        """initdb, start the server, wait until it accepts connections, create :attr:`database`.

        Retries with a new port (up to 3 attempts) if the port was taken in between.

        Returns:
            self.

        Raises:
            ComponentUnavailable: see the class docstring.
        """
        if self._proc is not None:
            return self
        self.bindir = find_bindir()
        self._start_with_port_retries(self._start_once, "already in use")
        return self

    def stop(self) -> None:
        """Fast shutdown (SIGINT; SIGKILL after 30 s) and remove the temp dir. Idempotent."""
        self._kill()
        self._discard()
        self._url = None

    def __repr__(self) -> str:
        return f"PostgresServer(url={self._url!r}, pid={self.pid}, bindir={str(self.bindir)!r})"

    # -- internals ---------------------------------------------------------------------------

    def server_settings(self) -> dict[str, str]:
        assert self.workdir and self.port
        s = {
            "listen_addresses": self.host,
            "port": str(self.port),
            "unix_socket_directories": str(self.workdir / "sock"),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "200",
            "wal_level": "logical",
            "max_wal_senders": "10",
            "max_replication_slots": "10",
            "logging_collector": "off",
            "log_min_messages": "warning",
            "timezone": "UTC",
        }
        s.update(self.settings)
        return s

    def _run_as(self) -> dict:
        """Popen keyword arguments to run as the ``postgres`` OS user when we are root."""
        if os.geteuid() != 0:
            return {}
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            raise ComponentUnavailable(
                "postgres", "running as root and there is no `postgres` OS user to run the server as "
                "(PostgreSQL refuses to run as root)", hint=_INSTALL_HINT + " (it creates the user)",
            ) from None
        return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}

    def _start_once(self) -> None:
        run_as = self._run_as()
        self.workdir = Path(tempfile.mkdtemp(prefix="conveyor-pg-"))
        (self.workdir / "sock").mkdir()
        if run_as:
            for p in (self.workdir, self.workdir / "sock"):
                os.chown(p, run_as["user"], run_as["group"])
        self.port = _support.free_port(self.host)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C", LANG="C", TZ="UTC")
        data = self.workdir / "data"
        try:
            init = subprocess.run(
                [str(self.bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
                 "-E", "UTF8", "--locale=C", "--no-sync"],
                check=False, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                cwd=self.workdir, env=env, **run_as,
            )
        except PermissionError as e:  # the postgres user cannot reach the temp dir
            raise ComponentUnavailable(
                "postgres", f"initdb as the postgres user cannot use {self.workdir}: {e}",
                hint="point TMPDIR at a directory the postgres user can traverse (e.g. /tmp)",
            ) from None
        if init.returncode != 0:
            raise ComponentUnavailable(
                "postgres", f"initdb failed (exit {init.returncode}) in {self.bindir}",
                log_tail="\n".join((init.stdout + init.stderr).splitlines()[-30:]),
            )
        if self.client_cidrs:  # e.g. pods on a test node: the host's own address is trusted already
            with open(data / "pg_hba.conf", "a") as hba:
                hba.writelines(f"host all all {cidr} trust\n" for cidr in (f"{self.host}/32", *self.client_cidrs))
        cmd = [*_support.pdeathsig_prefix("QUIT"), str(self.bindir / "postgres"), "-D", str(data)]
        for k, v in self.server_settings().items():
            cmd += ["-c", f"{k}={v}"]
        with open(self.workdir / self.log_name, "wb") as out:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.workdir, env=env, start_new_session=True, **run_as,
            )
        self._record = _support.register_child("postgres", self._proc.pid, self.workdir)
        _support.track(self)
        self._url = f"postgresql://postgres@{self.host}:{self.port}/postgres"
        self.wait_ready(self.startup_timeout)
        self.create_database(self.database)
        self._url = with_database(self._url, self.database)

    def _where(self) -> str:
        return f"PostgreSQL ({self.bindir}) on {self.host}:{self.port}"


def audit_catalog(url: str, schema: str = "conveyor_audit") -> dict[str, list[str]]:
    """What PostgreSQL's catalog holds of the postgres-audit-source's objects in the database
    at ``url``: ``{"triggers": ["<trigger> on <table>"], "functions": [...], "tables": [...]}``
    (names sorted; the triggers are ``conveyor_audit_*``, the rest is in ``schema``). For
    checking that a connector-deleted stop path removed them."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        triggers = [r[0] for r in conn.execute(
            "SELECT tgname || ' on ' || tgrelid::regclass FROM pg_trigger "
            "WHERE NOT tgisinternal AND tgname LIKE 'conveyor_audit_%' ORDER BY 1")]
        functions = [r[0] for r in conn.execute(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = %s ORDER BY 1", (schema,))]
        tables = [r[0] for r in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r' ORDER BY 1", (schema,))]
    return {"triggers": triggers, "functions": functions, "tables": tables}


@contextmanager
def holding_audit_schema_lock(url: str, schema: str = "conveyor_audit") -> Iterator[None]:
    """Hold, for the block, the advisory lock that the postgres-audit-source's provisioning and
    cleanup transactions take first (:data:`~conveyor.connectors.postgres_audit.provision.SCHEMA_LOCK_CLASS`):
    a cleanup started meanwhile waits (up to its ``ddl.lock.timeout.ms``) until the block ends,
    so a test can act while it is half-way."""
    import psycopg

    from conveyor.connectors.postgres_audit.provision import SCHEMA_LOCK_CLASS

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtext(%s), hashtext(%s))", (SCHEMA_LOCK_CLASS, schema))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s), hashtext(%s))", (SCHEMA_LOCK_CLASS, schema))


def _execute(url: str, sql: str) -> None:
    """Run one statement in autocommit mode; RuntimeError with the server's message on failure."""
    try:
        import psycopg
    except ImportError:
        psycopg = None
    if psycopg is not None:
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
                conn.execute(sql)
            return
        except psycopg.Error as e:
            raise RuntimeError(str(e).strip()) from e
    psql = shutil.which("psql")
    if psql is None:
        try:
            psql = str(find_bindir() / "psql")
        except ComponentUnavailable:
            raise ComponentUnavailable(
                "postgres", "neither psycopg nor psql is available to talk to the server",
                hint="pip install 'psycopg[binary]' or apt-get install postgresql-client",
            ) from None
    out = subprocess.run(
        [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
        check=False, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={**os.environ, "PGCONNECT_TIMEOUT": "5"},
    )
    if out.returncode != 0:
        raise RuntimeError((out.stderr or out.stdout).strip())


def start_or_reuse(*, env: Mapping[str, str] | None = None, **server_kwargs) -> PostgresEndpoint:
    """The server for a test session: reuse ``$CONVEYOR_POSTGRES_URL`` if set, else start one.

    Args:
        env: environment to read (default ``os.environ``).
        **server_kwargs: passed to :class:`PostgresServer` when one is started.

    Returns:
        A reachable :class:`ExternalPostgres` or a started :class:`PostgresServer` (call
        ``stop()`` when done; a no-op for the external one).

    Raises:
        ComponentUnavailable: the reused server does not answer within 30 s, or starting failed.
    """
    return reuse_or_start(env, ENV_URL, ExternalPostgres, lambda: PostgresServer(**server_kwargs).start())
