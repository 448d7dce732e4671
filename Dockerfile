# Conveyor container images. One Dockerfile, three stages, two images:
#
#   docker build --target runtime  -t conveyor:0.1.0          .   # drivers and executors (Spark + Java)
#   docker build --target operator -t conveyor-operator:0.1.0 .   # the kopf operator (no Spark, no Java)
#
# `runtime` is the last stage, so a plain `docker build .` builds it. The chart's `runtimeImage`
# names the runtime image and `image` the operator image.
#
# Build arguments (neither is needed for a normal build):
#   BASE_IMAGE  the image both targets start FROM: by default python:3.11-slim-bookworm pinned by
#               digest, so a rebuild starts from the same bytes (the tag moves with every Debian or
#               Python update). The digest is the linux/amd64 image manifest (Python 3.11.16, built
#               2026-08-25) as recorded by Docker's official-images metadata (docker-library/repo-info,
#               repos/python/remote/3.11-slim-bookworm.md); amd64, like the locks below. To move to a
#               newer build: `docker buildx imagetools inspect python:3.11-slim-bookworm` and take the
#               linux/amd64 manifest's digest. Any Debian 12 image with `python3` 3.11 and its `venv`
#               module works too: nothing below depends on where Python lives. The test harness
#               (conveyor.testing.images) passes a base it bootstrapped from Debian packages
#               (`--build-arg BASE_IMAGE=localhost/conveyor-base:...`): no registry is reachable there.
#   PIP_CERT    a CA bundle file for pip, for builds behind a TLS-inspecting proxy; it has to be
#               mounted into the build (e.g. `buildah bud --volume <dir with ca.crt>:/mnt:ro
#               --build-arg PIP_CERT=/mnt/ca.crt`). An ARG, so it is not kept in the image.
#
# Conveyor and its dependencies are installed into a virtual environment at /opt/conveyor/venv (on
# PATH), so the images never touch the base's own Python (Debian's is externally managed, PEP 668).
# Every Python package comes from a hashed lock (requirements/*.lock, written by
# scripts/lock-deps.sh for Python 3.11 on linux x86_64): `pip install --require-hashes --no-deps`
# installs exactly the locked files, sdists (pyspark's) are built with --no-build-isolation by the
# locked setuptools and wheel, and conveyor's own wheel goes in last with --no-index, so pip can fetch
# nothing and fails if the lock lacks anything conveyor and its extras require.
# pip's cache is a build cache mount (`RUN --mount=type=cache`, BuildKit's and buildah's syntax;
# Docker 23+ builds with BuildKit by default), so a rebuild after a change to a lock reuses the
# wheel built from pyspark's 400 MB sdist instead of fetching and building it again; a change to
# conveyor's sources alone reinstalls only conveyor's wheel (the locks are installed in layers before).
#
# How the runtime image runs on Kubernetes:
#   * The driver is a Deployment whose container runs `conveyor run ...` (ENTRYPOINT below), with
#     Spark in client mode against `k8s://https://kubernetes.default.svc`.
#   * Spark creates the executor pods itself, from this same image (spark.kubernetes.container.image),
#     and appends the argument `executor` to the container. `conveyor` has no `executor` command, so
#     the executor pod template (spark.kubernetes.executor.podTemplateFile) sets
#     `command: ["conveyor-spark-executor"]`: the launcher below starts Spark's
#     KubernetesExecutorBackend with the jars of the pip-installed pyspark (SPARK_HOME, the fixed
#     path /opt/conveyor/spark, a link to the pyspark package), the SPARK_JAVA_OPT_<n> options Spark
#     passes, SPARK_CLASSPATH (spark.executor.extraClassPath) and SPARK_EXECUTOR_LIBRARY_PATH
#     (spark.executor.extraLibraryPath), and -Xms/-Xmx from SPARK_EXECUTOR_MEMORY, the way Spark's
#     own image entrypoint does. Python workers run with PYSPARK_PYTHON (the venv's python).
#     `spark-class` and `spark-submit` are on PATH as well ($SPARK_HOME/bin).

ARG BASE_IMAGE=python:3.11-slim-bookworm@sha256:2fc9207f64226cb05ac317cee0bab6fa55a9ea311ce5a086baddd4b4a83c2d3c

# ---------------------------------------------------------------------------------------------
# builder: the conveyor wheel (pure Python; its dependencies are installed from each target's lock)
FROM ${BASE_IMAGE} AS builder

ARG PIP_CERT
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH="/opt/conveyor/venv/bin:${PATH}"
WORKDIR /src
COPY requirements/build.lock /tmp/requirements/
COPY pyproject.toml README.md ./
COPY src ./src
COPY operator ./operator
RUN --mount=type=cache,id=conveyor-pip,target=/root/.cache/pip \
    python3 -m venv /opt/conveyor/venv \
 && pip install --require-hashes --no-deps --no-build-isolation -r /tmp/requirements/build.lock \
 && pip wheel --no-deps --no-build-isolation --wheel-dir /wheels .

# ---------------------------------------------------------------------------------------------
# base: what both images share (the venv, the non-root user, Python settings)
FROM ${BASE_IMAGE} AS base

# Bytecode is compiled by pip at install time (the venv is read-only to the user at run time).
# The venv gets the locked pip, setuptools and wheel, whatever the base's are (Debian 12's pip 23.0
# would install an sdist such as pyspark's with `setup.py install`, leaving no built wheel in the cache).
ARG PIP_CERT
ENV PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/conveyor/venv \
    PATH="/opt/conveyor/venv/bin:${PATH}"
COPY requirements/build.lock /tmp/requirements/
RUN --mount=type=cache,id=conveyor-pip,target=/root/.cache/pip \
    python3 -m venv /opt/conveyor/venv \
 && pip install --require-hashes --no-deps --no-build-isolation -r /tmp/requirements/build.lock \
 && rm -rf /tmp/requirements \
 && groupadd --gid 10001 conveyor \
 && useradd --uid 10001 --gid 10001 --no-log-init --create-home --home-dir /home/conveyor \
      --shell /usr/sbin/nologin conveyor
WORKDIR /home/conveyor

# ---------------------------------------------------------------------------------------------
# operator: `conveyor-operator` (kopf, standalone) — no Spark, no Java. The built-in connectors'
# extras are installed so that the operator runs each connector's own config validation
# (a refused config becomes the Connector's Degraded condition instead of a crash-looping driver).
FROM base AS operator

ARG PIP_CERT
COPY requirements/operator.lock /tmp/requirements/
RUN --mount=type=cache,id=conveyor-pip,target=/root/.cache/pip \
    pip install --require-hashes --no-deps --no-build-isolation -r /tmp/requirements/operator.lock \
 && rm -rf /tmp/requirements
COPY --from=builder /wheels /tmp/wheels
# The wheel built above, from no index (see the top): its extras' requirements must all be locked
# (the wheel is this build's own, so it has no version to pin).
# hadolint ignore=DL3013
RUN set -- /tmp/wheels/conveyor-*.whl \
 && pip install --no-cache-dir --no-index "$1[operator,postgres,rabbitmq,archive]" \
 && pip check \
 && rm -rf /tmp/wheels

USER 10001:10001
ENTRYPOINT ["conveyor-operator"]

# ---------------------------------------------------------------------------------------------
# runtime: `conveyor` with Spark (Java 17) and the built-in connectors' extras
FROM base AS runtime

# The man directory is missing on slim images and the JRE's postinst registers man pages in it.
# Versions are pinned to the Debian 12 series (security updates replace exact versions).
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends \
      libnss-wrapper=1.1.* \
      openjdk-17-jre-headless=17.0.* \
      tini=0.19.* \
 && rm -rf /var/lib/apt/lists/* \
 && java_home="$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" \
 && ln -s "$java_home" /usr/lib/jvm/java-17

ARG PIP_CERT
COPY requirements/runtime.lock /tmp/requirements/
# Sdists (pyspark's) are built by the locked setuptools and wheel (no isolated build environment).
# SPARK_HOME is a fixed path: a link to the pyspark package in the venv's site-packages.
RUN --mount=type=cache,id=conveyor-pip,target=/root/.cache/pip \
    pip install --require-hashes --no-deps --no-build-isolation -r /tmp/requirements/runtime.lock \
 && rm -rf /tmp/requirements \
 && ln -s "$(python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')" /opt/conveyor/spark
COPY --from=builder /wheels /tmp/wheels
# The wheel built above, from no index (see the top): its extras' requirements must all be locked
# (the wheel is this build's own, so it has no version to pin).
# hadolint ignore=DL3013
RUN set -- /tmp/wheels/conveyor-*.whl \
 && pip install --no-cache-dir --no-index "$1[spark,postgres,rabbitmq,archive]" \
 && pip check \
 && rm -rf /tmp/wheels

ENV JAVA_HOME=/usr/lib/jvm/java-17 \
    SPARK_HOME=/opt/conveyor/spark \
    PYSPARK_PYTHON=/opt/conveyor/venv/bin/python
ENV PATH="${PATH}:${SPARK_HOME}/bin"

# The Spark executor launcher (see the top of this file). Spark appends `executor`; it is dropped.
# The script is written literally (single quotes); its variables expand when it runs.
# hadolint ignore=SC2016
RUN printf '%s\n' \
      '#!/bin/bash' \
      '# Spark-on-Kubernetes executor for the conveyor runtime image (see its Dockerfile).' \
      'set -euo pipefail' \
      'if [ "${1:-}" = executor ]; then shift; fi' \
      '# A UID without a passwd entry (OpenShift assigns one): Hadoop login needs an entry, as in' \
      '# Spark own images: libnss_wrapper and a passwd file under /tmp (conveyor.runtime.driver.passwd_entry).' \
      'if ! getent passwd "$(id -u)" >/dev/null; then' \
      '  nss_lib="$(ls /usr/lib/*/libnss_wrapper.so 2>/dev/null | head -n 1)"' \
      '  if [ -n "$nss_lib" ]; then' \
      '    mkdir -p /tmp/conveyor-nss' \
      '    { cat /etc/passwd; echo "conveyor:x:$(id -u):$(id -g):conveyor:/tmp:/bin/false"; } > /tmp/conveyor-nss/passwd' \
      '    export LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD }$nss_lib" NSS_WRAPPER_PASSWD=/tmp/conveyor-nss/passwd NSS_WRAPPER_GROUP=/etc/group' \
      '  fi' \
      'fi' \
      'mapfile -t java_opts < <(env | grep "^SPARK_JAVA_OPT_" | sort -t_ -k4 -n | sed "s/^[^=]*=//")' \
      'classpath="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:$SPARK_HOME/jars/*${SPARK_CLASSPATH:+:$SPARK_CLASSPATH}"' \
      'classpath="$classpath${SPARK_DIST_CLASSPATH:+:$SPARK_DIST_CLASSPATH}"' \
      'if [ -n "${SPARK_EXECUTOR_LIBRARY_PATH:-}" ]; then' \
      '  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$SPARK_EXECUTOR_LIBRARY_PATH"' \
      'fi' \
      'exec tini -s -- "$JAVA_HOME/bin/java" "${java_opts[@]}" \' \
      '  -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" -cp "$classpath" \' \
      '  org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \' \
      '  --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID" \' \
      '  --cores "$SPARK_EXECUTOR_CORES" --app-id "$SPARK_APPLICATION_ID" \' \
      '  --hostname "$SPARK_EXECUTOR_POD_IP" --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \' \
      '  --podName "$SPARK_EXECUTOR_POD_NAME" "$@"' \
      > /usr/local/bin/conveyor-spark-executor \
 && chmod 0755 /usr/local/bin/conveyor-spark-executor \
 && test -x "$SPARK_HOME/bin/spark-class" \
 && test -f "$SPARK_HOME/jars/spark-kubernetes_2.13-$(python -c 'import pyspark; print(pyspark.__version__)').jar" \
 && "$JAVA_HOME/bin/java" -version

USER 10001:10001
# tini is PID 1: it forwards SIGTERM to `conveyor run` (closing commits) and reaps the JVM's orphans.
ENTRYPOINT ["tini", "--", "conveyor"]
