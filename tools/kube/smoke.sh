#!/usr/bin/env bash
# Smoke test for the envtest-style control plane built by build.sh:
# start etcd + kube-apiserver on free loopback ports with throw-away state,
# wait for /readyz, talk to it with kubectl and helm, then tear everything down.
#
# Usage: tools/kube/smoke.sh
# Environment:
#   BIN      directory with kube-apiserver, kubectl, etcd, helm (default: output of build.sh)
#   ETCD     etcd binary to use (default: $BIN/etcd; e.g. /usr/bin/etcd for Debian's)
#   KUBECTL  kubectl binary (default: $BIN/kubectl, else kubectl on PATH)
#   READY_TIMEOUT  seconds to wait for /readyz (default 90)
#   SMOKE_LOG_DIR  if set, etcd.log and apiserver.log are copied there on exit
# Everything listens on 127.0.0.1 only; nothing is left running on exit.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=${BIN:-$("$HERE/build.sh")}
ETCD=${ETCD:-$BIN/etcd}
if [ -z "${KUBECTL:-}" ]; then
    if [ -x "$BIN/kubectl" ]; then
        KUBECTL=$BIN/kubectl
    else
        KUBECTL=$(command -v kubectl) || { echo "smoke.sh: no kubectl in $BIN or on PATH" >&2; exit 1; }
    fi
fi
HELM=${HELM:-$BIN/helm}
READY_TIMEOUT=${READY_TIMEOUT:-90}

log() { echo "[kube/smoke] $*" >&2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/conveyor-kube-smoke.XXXXXX")
PIDS=()
cleanup() {
    local rc=$? pid
    # Stop only the processes this script started, newest first.
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        pid=${PIDS[i]}
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done
    if [ "$rc" -ne 0 ]; then
        log "FAILED (rc=$rc); last log lines:"
        tail -n 20 "$WORK"/etcd.log "$WORK"/apiserver.log >&2 2>/dev/null || true
    fi
    if [ -n "${SMOKE_LOG_DIR:-}" ]; then
        mkdir -p "$SMOKE_LOG_DIR" && cp "$WORK"/*.log "$SMOKE_LOG_DIR"/ 2>/dev/null || true
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Ask the kernel for a free loopback port (tiny race window, fine for tests).
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
ETCD_CLIENT_PORT=$(free_port)
ETCD_PEER_PORT=$(free_port)
API_PORT=$(free_port)

# --- credentials -------------------------------------------------------------
# Service-account token signing key (the apiserver refuses to start without one).
openssl genrsa -out "$WORK/sa.key" 2048 2>/dev/null
openssl rsa -in "$WORK/sa.key" -pubout -out "$WORK/sa.pub" 2>/dev/null
# Static bearer token for an admin in system:masters (bypasses RBAC).
TOKEN=$(openssl rand -hex 16)
echo "$TOKEN,admin,admin,system:masters" >"$WORK/tokens.csv"
# kubeconfig for kubectl/helm. The serving cert is self-signed by the
# apiserver (--cert-dir), so TLS verification is skipped.
cat >"$WORK/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: smoke
  cluster:
    server: https://127.0.0.1:$API_PORT
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: $TOKEN
contexts:
- name: smoke
  context: {cluster: smoke, user: admin}
current-context: smoke
EOF
export KUBECONFIG="$WORK/kubeconfig"

# --- etcd --------------------------------------------------------------------
log "etcd: $("$ETCD" --version | head -n1) on 127.0.0.1:$ETCD_CLIENT_PORT"
etcd_extra=()
# Throw-away data: skip fsync where supported (etcd >= 3.5), like envtest.
if "$ETCD" --help 2>&1 | grep -q -- --unsafe-no-fsync; then etcd_extra+=(--unsafe-no-fsync); fi
T0=$(date +%s.%N)
"$ETCD" \
    --name=smoke \
    --data-dir="$WORK/etcd" \
    --listen-client-urls="http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --advertise-client-urls="http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="smoke=http://127.0.0.1:$ETCD_PEER_PORT" \
    --log-level=warn \
    "${etcd_extra[@]}" \
    >"$WORK/etcd.log" 2>&1 &
PIDS+=($!)

# --- kube-apiserver ----------------------------------------------------------
# Same shape as controller-runtime's envtest: no kubelet/scheduler, admission
# ServiceAccount disabled (no token controller running), RBAC on.
log "kube-apiserver: $("$BIN/kube-apiserver" --version) on 127.0.0.1:$API_PORT"
mkdir -p "$WORK/certs"
"$BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --cert-dir="$WORK/certs" \
    --bind-address=127.0.0.1 \
    --advertise-address=127.0.0.1 \
    --secure-port="$API_PORT" \
    --service-account-issuer="https://kubernetes.default.svc.cluster.local" \
    --service-account-key-file="$WORK/sa.pub" \
    --service-account-signing-key-file="$WORK/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode=RBAC \
    --token-auth-file="$WORK/tokens.csv" \
    --disable-admission-plugins=ServiceAccount \
    --allow-privileged=true \
    >"$WORK/apiserver.log" 2>&1 &
PIDS+=($!)

# --- wait for /readyz --------------------------------------------------------
deadline=$(( $(date +%s) + READY_TIMEOUT ))
until "$KUBECTL" get --raw /readyz >/dev/null 2>&1; do
    for pid in "${PIDS[@]}"; do
        kill -0 "$pid" 2>/dev/null || { log "a control-plane process exited early"; exit 1; }
    done
    [ "$(date +%s)" -lt "$deadline" ] || { log "no /readyz after ${READY_TIMEOUT}s"; exit 1; }
    sleep 0.2
done
log "ready after $(python3 -c "print(f'{$(date +%s.%N) - $T0:.1f}')")s (etcd + apiserver start to /readyz ok)"

# --- talk to it --------------------------------------------------------------
# The explicit flags the brief asks for; the kubeconfig above says the same.
echo "+ kubectl get --raw /readyz"
"$KUBECTL" --kubeconfig=/dev/null --server "https://127.0.0.1:$API_PORT" --token "$TOKEN" \
    --insecure-skip-tls-verify get --raw /readyz
echo
log "kubectl: $KUBECTL"
echo "+ kubectl version"
"$KUBECTL" version
echo "+ kubectl api-resources | head"
# (via a file: `| head` would SIGPIPE kubectl and trip pipefail)
"$KUBECTL" api-resources >"$WORK/api-resources.txt"
head "$WORK/api-resources.txt"
echo "... $(wc -l <"$WORK/api-resources.txt") lines"
echo "+ kubectl create namespace smoke && kubectl get ns"
"$KUBECTL" create namespace smoke
"$KUBECTL" get namespaces
echo "+ helm version"
"$HELM" version
echo "+ helm list -A (talks to the apiserver)"
"$HELM" list -A
log "OK"
