"""Apache Avro's Java library (``org.apache.avro:avro``) and ``avro-tools`` from Maven Central,
for tests that read the archive sink's Avro files with Avro's own reader
(``tests/integration/java/AvroArchiveReader.java``) and ``avro-tools tojson``.

The library is resolved once with ``mvn dependency:copy-dependencies`` into
``<cache>/avro-java-<version>/libs``, avro-tools' self-contained jar (73 MB) with ``mvn
dependency:copy`` into ``<cache>/avro-tools-<version>/libs`` (``<cache>`` is
``$CONVEYOR_CACHE_DIR`` or ``~/.cache/conveyor``);
``python -m conveyor.testing resolve --avro`` does it up front. Needs Maven and Java 17+.
"""

from __future__ import annotations

from pathlib import Path

from conveyor.testing import _support
from conveyor.testing.maven import COPY_ARTIFACT, artifact_pom, classpath_pom, resolve_libs

AVRO_VERSION = "1.12.2"
COMPONENT = "avro-java"


def render_pom(version: str = AVRO_VERSION) -> str:
    """The Maven POM whose runtime dependencies are Apache Avro's Java library."""
    return classpath_pom("avro-java-classpath", version, [("org.apache.avro", "avro", version)],
                         "Apache Avro's Java library (the archive sink's Avro files read by Avro itself).")


def avro_libs(version: str = AVRO_VERSION, *, timeout: float = 1800.0) -> Path:
    """Directory holding ``avro-<version>.jar`` and its runtime dependencies; resolved on first use.

    Args:
        version: Apache Avro version.
        timeout: seconds allowed for Maven.

    Returns:
        ``<cache>/avro-java-<version>/libs``.

    Raises:
        ComponentUnavailable: mvn is missing or the resolution failed.
    """
    return resolve_libs(
        _support.cache_root() / f"avro-java-{version}", render_pom(version), f"avro-{version}.jar",
        component=COMPONENT, what=f"Apache Avro {version} (Java)", timeout=timeout,
    )


def render_tools_pom(version: str = AVRO_VERSION) -> str:
    """The Maven POM naming ``avro-tools-<version>.jar`` (self-contained; for ``mvn dependency:copy``)."""
    return artifact_pom("avro-tools-jar", version, ("org.apache.avro", "avro-tools", version), "",
                        "Apache Avro's command line tools (tojson), reading the archive sink's Avro files.")


def avro_tools_jar(version: str = AVRO_VERSION, *, timeout: float = 1800.0) -> Path:
    """Path of ``avro-tools-<version>.jar`` (``java -jar avro-tools.jar tojson FILE``); resolved on first use.

    Returns:
        ``<cache>/avro-tools-<version>/libs/avro-tools-<version>.jar``.

    Raises:
        ComponentUnavailable: mvn is missing or the resolution failed.
    """
    jar = f"avro-tools-{version}.jar"
    libs = resolve_libs(_support.cache_root() / f"avro-tools-{version}", render_tools_pom(version), jar,
                        component=COMPONENT, what=f"Apache Avro {version} tools", timeout=timeout, goal=COPY_ARTIFACT)
    return libs / jar
