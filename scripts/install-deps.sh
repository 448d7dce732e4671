#!/usr/bin/env bash
# Installs what Conveyor's tests and quickstart need, idempotently; meant to be sourced
# (`source scripts/install-deps.sh`) so that `python` on PATH afterwards is the interpreter
# Conveyor was installed into. Used by .ci/run and examples/quickstart.sh.
#
#   1. system packages: postgresql, rabbitmq-server, openjdk-17-jdk-headless, maven (+ ca-certificates,
#      python3-venv when needed), and what the end-to-end tier's Kubernetes node and image builds
#      need (containerd, runc, CNI plugins, iptables, conntrack, busybox-static, gcc, buildah,
#      debootstrap); apt-get runs only if something is missing
#   2. Python: pip install -e '.[dev]' into the current interpreter, or into ./.venv when the
#      interpreter is Debian's externally managed one (PEP 668)
#   3. Apache Kafka broker and Kafka Connect worker jars, S3Proxy's jar (the tests' S3 server),
#      Apicurio Registry (the tests' Schema Registry, unpacked) and Apache Avro's Java library (the
#      archive's Avro files read by Avro itself) from Maven Central into the harness cache
#      (python -m conveyor.testing resolve --connect --s3 --schema-registry --avro); with
#      CONVEYOR_DEPS=quickstart (examples/quickstart.sh) the broker's jars only
#
# Environment: PYTHON (interpreter to use), CONVEYOR_CACHE_DIR, CONVEYOR_DEPS (tests | quickstart)
# are honoured.
set -euo pipefail

ORIGINAL_PATH="${ORIGINAL_PATH:-$PATH}"  # the caller's, before this script puts its python first
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export DEBIAN_FRONTEND=noninteractive
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PYTHONUNBUFFERED=1

section() { printf '\n===== %s =====\n' "$*"; }
die() { printf '\n%s: FAILED: %s\n' "${0##*/}" "$*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------
section "1/3 system packages"

installed() { dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null | grep -q '^ii'; }

is_managed_python() {  # $1 = interpreter; true if pip refuses to install into it (PEP 668)
    "$1" - <<'EOF'
import os, sys, sysconfig
in_venv = sys.prefix != sys.base_prefix
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
sys.exit(0 if (not in_venv and os.path.exists(marker)) else 1)
EOF
}

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
    if [ -x .venv/bin/python ]; then PY="$PWD/.venv/bin/python"
    elif command -v python3 >/dev/null; then PY=python3
    elif command -v python >/dev/null; then PY=python
    fi
fi

missing=()
if command -v apt-get >/dev/null; then
    for pkg in ca-certificates postgresql rabbitmq-server openjdk-17-jdk-headless maven \
               containerd runc containernetworking-plugins iptables conntrack iproute2 busybox-static \
               gcc libc6-dev buildah debootstrap; do
        installed "$pkg" || missing+=("$pkg")
    done
    if [ -z "$PY" ]; then
        missing+=(python3 python3-venv)
    elif is_managed_python "$PY" && ! "$PY" -c 'import ensurepip' 2>/dev/null; then
        missing+=(python3-venv)
    fi
else
    echo "no apt-get: not a Debian machine, checking the tools are there"
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null \
        || die "PostgreSQL server binaries missing (initdb)"
    command -v mvn >/dev/null || die "maven (mvn) missing"
    [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || command -v rabbitmq-server >/dev/null \
        || [ -n "${CONVEYOR_RABBITMQ_HOME:-}${CONVEYOR_RABBITMQ_URL:-}" ] \
        || die "RabbitMQ missing (install it, or set CONVEYOR_RABBITMQ_HOME to an install / CONVEYOR_RABBITMQ_URL to a broker)"
    command -v java >/dev/null || [ -n "${JAVA_HOME:-}" ] || die "Java 17 missing"
    [ -n "$PY" ] || die "python3 missing"
fi

if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    SUDO=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || die "need root (or sudo) to apt-get install ${missing[*]}"
        SUDO=(sudo -n)
    fi
    # openjdk's postinst needs this directory, which slim images drop
    "${SUDO[@]}" mkdir -p /usr/share/man/man1
    "${SUDO[@]}" apt-get update -q
    "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
    [ -n "$PY" ] || PY=python3
else
    echo "all present: postgresql, rabbitmq-server, openjdk-17-jdk-headless, maven, containerd, runc, buildah, ..."
fi
first_line() { local out; out="$("$@" 2>&1 || true)"; echo "${out%%$'\n'*}"; }
echo "postgresql: $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -n 1 || true)"
echo "java: $(first_line java -version)"
echo "maven: $(first_line mvn -B -v)"
echo "rabbitmq: $(ls -d /usr/lib/rabbitmq/lib/rabbitmq_server-* 2>/dev/null | tail -n 1 || true)"

# ---------------------------------------------------------------------------------------------
section "2/3 python environment: pip install -e '.[dev]'"

if is_managed_python "$PY"; then
    echo "$PY is externally managed (PEP 668): using a virtualenv in .venv"
    [ -x .venv/bin/python ] || "$PY" -m venv .venv
    PY="$PWD/.venv/bin/python"
fi
"$PY" -c 'import sys; assert sys.version_info >= (3, 10), sys.version' \
    || die "Python 3.10+ is required ($PY is $("$PY" -V 2>&1))"
# make `python` on PATH this interpreter (the test command below is `python -m pytest`)
PY_BIN_DIR="$("$PY" -c 'import os, sys; print(os.path.dirname(sys.executable))')"
export PATH="$PY_BIN_DIR:$PATH"
if [ -f "$PY_BIN_DIR/activate" ]; then
    export VIRTUAL_ENV="$(dirname "$PY_BIN_DIR")"
fi
same_interpreter='import os, sys; print(os.path.realpath(sys.executable), sys.prefix)'
[ "$(python -c "$same_interpreter" 2>/dev/null)" = "$("$PY" -c "$same_interpreter")" ] \
    || die "\`python\` on PATH is not $PY (create a virtualenv or set PYTHON)"
echo "python: $(python -c 'import sys; print(sys.executable, sys.version.split()[0])')"
python -m pip install -q -e '.[dev]'
python -m pip check || echo "warning: pip check reports conflicts (see above)"

# `conveyor` must work in the user's own shell afterwards, where $PY_BIN_DIR is not on PATH (a
# .venv) or not yet hashed (pyenv shims need a rehash): link it into a directory that is.
link_cli() {
    local target="$PY_BIN_DIR/conveyor" dir
    [ -x "$target" ] || return 0
    for dir in /usr/local/bin "$HOME/.local/bin"; do
        case ":$ORIGINAL_PATH:" in *":$dir:"*) ;; *) continue ;; esac
        if [ -w "$dir" ] || { [ ! -e "$dir" ] && mkdir -p "$dir" 2>/dev/null; }; then
            [ "$(readlink -f "$dir/conveyor" 2>/dev/null)" = "$(readlink -f "$target")" ] \
                || ln -sfn "$target" "$dir/conveyor"
            echo "conveyor: $dir/conveyor -> $target"
            return 0
        fi
    done
    echo "note: to run \`conveyor\` from your shell: export PATH=\"$PY_BIN_DIR:\$PATH\""
}
link_cli

# ---------------------------------------------------------------------------------------------
if [ "${CONVEYOR_DEPS:-tests}" = quickstart ]; then  # examples/quickstart.sh: the broker is all it runs
    section "3/3 Apache Kafka broker (Maven Central, cached)"
    python -m conveyor.testing resolve >/dev/null || die "could not resolve the Apache Kafka broker's jars"
else
    section "3/3 Apache Kafka broker, Kafka Connect, S3Proxy, Apicurio Registry and Apache Avro (Maven Central, cached)"
    python -m conveyor.testing resolve --connect --s3 --schema-registry --avro \
        || die "could not resolve the Apache Kafka / Kafka Connect / S3Proxy / Apicurio Registry / Apache Avro artifacts"
fi

