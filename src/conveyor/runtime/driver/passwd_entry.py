"""A passwd entry for a UID the image does not know, for the JVM Spark starts.

Platforms such as OpenShift run a pod under an arbitrary UID (restricted-v2 SCC) with no line in
the image's ``/etc/passwd``. Hadoop's login (``UserGroupInformation``, through the JDK's
``UnixLoginModule``) then fails with ``invalid null input: name`` and Spark cannot start. As
Spark's own images do (apache/spark-docker ``entrypoint.sh``), the JVM is started with
``libnss_wrapper`` preloaded and a passwd file under ``/tmp`` that has the entry. The executor
launcher of the runtime image does the same in shell (Dockerfile).
"""

from __future__ import annotations

import glob
import logging
import os
import pwd
from collections.abc import MutableMapping
from pathlib import Path

log = logging.getLogger(__name__)

NSS_WRAPPER_GLOB = "/usr/lib/*/libnss_wrapper.so"
USER_NAME = "conveyor"


def ensure_passwd_entry(env: MutableMapping[str, str] = os.environ, directory: str | Path = "/tmp") -> bool:
    """Make processes started with ``env`` see a passwd entry for this process's UID.

    Does nothing when ``/etc/passwd`` has one. Otherwise writes ``<directory>/conveyor-nss/passwd``
    (``/etc/passwd`` plus ``conveyor:x:<uid>:<gid>::/tmp:/bin/false``) and sets ``LD_PRELOAD``,
    ``NSS_WRAPPER_PASSWD`` and ``NSS_WRAPPER_GROUP`` in ``env``.

    Returns:
        True when ``env`` was changed; False when no change was needed or ``libnss_wrapper``
        is not installed (then logged: the JVM's login will fail).
    """
    uid, gid = os.getuid(), os.getgid()
    try:
        pwd.getpwuid(uid)
        return False
    except KeyError:
        pass
    libraries = sorted(glob.glob(NSS_WRAPPER_GLOB))
    if not libraries:
        log.warning("UID %d has no passwd entry and libnss_wrapper is not installed: Spark's login will fail", uid)
        return False
    nss = Path(directory) / "conveyor-nss"
    nss.mkdir(mode=0o700, parents=True, exist_ok=True)
    passwd = nss / "passwd"
    passwd.write_text(Path("/etc/passwd").read_text() + f"{USER_NAME}:x:{uid}:{gid}:{USER_NAME}:/tmp:/bin/false\n")
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = f"{preload} {libraries[0]}".strip()
    env["NSS_WRAPPER_PASSWD"] = str(passwd)
    env["NSS_WRAPPER_GROUP"] = "/etc/group"
    log.info("UID %d has no passwd entry: the JVM gets one through libnss_wrapper (%s)", uid, passwd)
    return True
