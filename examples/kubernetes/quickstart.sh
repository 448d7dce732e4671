#!/usr/bin/env bash
# The Kubernetes quickstart (as root, on a Debian 12 machine): installs what is missing, brings
# up a single-node Kubernetes where pods run, with a Kafka broker and PostgreSQL on the node's IP,
# builds the Dockerfile's images, imports them into the node and `helm install`s the chart
# (`python -m conveyor.testing up --node`, left running in the background), then runs
# examples/kubernetes/quickstart.py against it. The cluster keeps running afterwards, for kubectl;
# the next run stops it and starts a fresh one (reusing what was built).
#
#   bash examples/kubernetes/quickstart.sh          # up (or reuse), then the quickstart's steps
#   bash examples/kubernetes/quickstart.sh --down   # stop the cluster, the broker and PostgreSQL
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
STATE="${CONVEYOR_CACHE_DIR:-$HOME/.cache/conveyor}/quickstart-kubernetes"
ENV_FILE="$STATE/env" PID_FILE="$STATE/pid" LOG="$STATE/up.log"
mkdir -p "$STATE"

running() { [ -f "$PID_FILE" ] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; }

down() {
    if running; then
        local pid
        pid="$(cat "$PID_FILE")"
        echo "stopping the quickstart's cluster, broker and PostgreSQL (pid $pid) ..."
        kill -TERM "$pid"
        for _ in $(seq 1 180); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
        if kill -0 "$pid" 2>/dev/null; then echo "still running after 180 s: kill -9 $pid" >&2; return 1; fi
    fi
    rm -f "$PID_FILE" "$ENV_FILE"
}

if [ "${1:-}" = --down ]; then
    down
    echo "down"
    exit 0
fi

# shellcheck source=../../scripts/install-deps.sh
CONVEYOR_DEPS=quickstart source scripts/install-deps.sh
section "kubernetes quickstart"
began=$SECONDS
down  # every run starts from a fresh cluster (what is built stays cached)
echo "bringing up a single-node Kubernetes, Kafka and PostgreSQL, the images and the chart (log: $LOG)"
echo "  a fresh machine first builds the Kubernetes binaries (~10 min on 2 cores) and, beside them, the images (~4 min)"
setsid python -m conveyor.testing up --node --env-file "$ENV_FILE" </dev/null >"$LOG" 2>&1 &
echo $! >"$PID_FILE"
shown=0
show_new_lines() {  # the log's lines since the last call, but the export lines (sourced below)
    local lines
    lines=$(wc -l <"$LOG")
    if [ "$lines" -gt "$shown" ]; then
        tail -n +"$((shown + 1))" "$LOG" | head -n "$((lines - shown))" | grep -v '^export ' | sed 's/^/  /' || true
        shown=$lines
    fi
}
until [ -f "$ENV_FILE" ]; do
    running || { echo "the cluster did not come up; the end of $LOG:" >&2; tail -n 40 "$LOG" >&2; exit 1; }
    show_new_lines
    sleep 2
done
show_new_lines
echo "up in $((SECONDS - began)) s"
# shellcheck disable=SC1090
source "$ENV_FILE"
python examples/kubernetes/quickstart.py "$@"
cat <<EOM

The cluster keeps running. To look around:
  export KUBECONFIG=$KUBECONFIG
  alias kubectl=$CONVEYOR_KUBECTL
  kubectl get connectors,pods -n quickstart
Stop everything: bash examples/kubernetes/quickstart.sh --down   (whole run: $((SECONDS - began)) s)
EOM
