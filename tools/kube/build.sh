#!/usr/bin/env bash
# Build the binaries the operator tests need (envtest-style: a real
# kube-apiserver + etcd, no kubelet/scheduler), plus helm, from the Go module
# proxy only -- no GitHub release downloads.
#
#   kube-apiserver  from ./apiserver (wrapper module over k8s.io/kubernetes)
#   kubectl         from ./apiserver/cmd/kubectl (same module, same version)
#   etcd            from ./etcd      (wrapper module over go.etcd.io/etcd/server/v3)
#   helm            go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION
#
# and, only when asked (`build.sh node`, or named in KUBE_BUILD_ONLY), what a
# single node where pods really run needs besides those:
#
#   kubelet, kube-controller-manager, kube-scheduler, kube-proxy
#                   from ./apiserver/cmd/<name> (the same module and version)
#   coredns         go install github.com/coredns/coredns@$COREDNS_VERSION (cluster DNS)
#
# Binaries land in ${CONVEYOR_CACHE_DIR:-~/.cache/conveyor}/kube/<kube-version>/bin
# (~/.cache is $XDG_CACHE_HOME when set, as for the rest of the test harness).
# The script is idempotent: a binary is rebuilt only when it is missing or its
# <name>.version stamp does not match the wanted version. On success the bin
# directory is printed on stdout (everything else goes to stderr), so callers
# can do:   BIN=$(tools/kube/build.sh)
#
# Environment:
#   CONVEYOR_CACHE_DIR  cache root (default ${XDG_CACHE_HOME:-~/.cache}/conveyor)
#   HELM_VERSION        helm v3 version (default below)
#   COREDNS_VERSION     CoreDNS version for `build.sh node` (default below)
#   GO                  go binary (default: go on PATH, else /usr/local/go/bin/go)
#   KUBE_BUILD_ONLY     space-separated subset of "kube-apiserver kubectl etcd helm" and
#                       the node binaries "kubelet kube-controller-manager kube-scheduler
#                       kube-proxy coredns" (default: the first four; `build.sh node`: all)
#
# Needs Go >= the "go" line in apiserver/go.mod (1.26 for Kubernetes 1.36).
# A cold build takes ~1.2 GB of module downloads and several minutes of CPU;
# see README.md in this directory for measurements.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HELM_VERSION=${HELM_VERSION:-v3.22.0}
COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}

GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}

# check_go: called before the first build only, so a fully cached bin dir needs no Go.
# Fails with a clear message (rather than a go.mod error deep in the build) when Go is
# missing or older than the "go" line of the apiserver module.
GO_CHECKED=
check_go() {
    [ -z "$GO_CHECKED" ] || return 0
    local need have
    need=$(awk '$1 == "go" { print $2; exit }' "$HERE/apiserver/go.mod")
    [ -x "$GO" ] || { echo "build.sh: no Go toolchain found (need Go >= $need; install it or set GO=...)" >&2; exit 1; }
    have=$("$GO" env GOVERSION 2>/dev/null) || have=unknown
    have=${have#go}
    if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n1)" != "$need" ]; then
        echo "build.sh: $GO is Go $have; Go >= $need is needed (the go line of k8s.io/kubernetes)" >&2
        exit 1
    fi
    GO_CHECKED=1
}

log() { echo "[kube/build] $*" >&2; }

# Versions come from the wrapper modules so there is one source of truth.
# modver GOMOD MODULE: the required version of MODULE, whether the require is
# a one-liner or inside a require ( ... ) block.
modver() {
    awk -v mod="$2" '{ i = ($1 == "require") ? 2 : 1 }
        $i == mod && $(i + 1) ~ /^v/ { print $(i + 1); exit }' "$1"
}
KUBE_VERSION=$(modver "$HERE/apiserver/go.mod" k8s.io/kubernetes)
ETCD_VERSION=$(modver "$HERE/etcd/go.mod" go.etcd.io/etcd/server/v3)
[ -n "$KUBE_VERSION" ] && [ -n "$ETCD_VERSION" ] || { echo "build.sh: cannot read versions from go.mod files" >&2; exit 1; }

# Every staging replace must point at v0.<minor>.<patch> of KUBE_VERSION
# (kubernetes v1.36.3 <-> k8s.io/api v0.36.3 etc.); mixing them breaks the build
# in confusing ways, so fail early.
STAGING_VERSION="v0.${KUBE_VERSION#v1.}"
bad=$(awk -v want="$STAGING_VERSION" '$2 == "=>" && $4 != want {print $1 " " $4}' "$HERE/apiserver/go.mod")
[ -z "$bad" ] || { echo "build.sh: staging replaces not at $STAGING_VERSION:" >&2; echo "$bad" >&2; exit 1; }

# Same cache root as the Python harness (conveyor.testing._support.cache_root).
CACHE_ROOT=${CONVEYOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/conveyor}
BIN="$CACHE_ROOT/kube/$KUBE_VERSION/bin"
mkdir -p "$BIN"
# One build at a time per cache (two pytest workers, or CI and a developer): the second waits,
# then finds what the first built cached.
exec 9>"$CACHE_ROOT/kube/build.lock"
if ! flock -n 9; then
    log "another build.sh is building into $BIN; waiting for it"
    flock 9
fi

CONTROL_PLANE="kube-apiserver kubectl etcd helm"
NODE="kubelet kube-controller-manager kube-scheduler kube-proxy coredns"
case "${1:-}" in
    "") ONLY=${KUBE_BUILD_ONLY:-$CONTROL_PLANE} ;;
    node) ONLY="$CONTROL_PLANE $NODE" ;;
    *) echo "usage: build.sh [node]" >&2; exit 2 ;;
esac
wanted() { [[ " $ONLY " == *" $1 "* ]]; }

# up_to_date NAME VERSION: binary present and stamped with VERSION.
up_to_date() {
    [ -x "$BIN/$1" ] && [ "$(cat "$BIN/$1.version" 2>/dev/null)" = "$2" ]
}

# Static, reproducible-ish builds; no cgo needed by any of them.
export CGO_ENABLED=0
# The compiler collects garbage less often (it uses more memory, a few GiB at most for these
# packages): cold builds take less CPU.
export GOGC=${GOGC:-400}
# -v on every build: the log names each package as it compiles (the harness shows the last one
# as progress). Never let a go.mod "toolchain" line download a different Go silently.
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}

# Same version variables hack/lib/version.sh sets, so /version and `kubectl
# version` report v1.36.3 instead of v0.0.0-master (helm/kubectl compare
# against it).
kube_ldflags() {
    local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
    local ld="-s -w" pkg
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ld+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
        ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    done
    echo "$ld"
}

# build_kube NAME PKG: a main package of the apiserver wrapper module.
build_kube() {
    (cd "$HERE/apiserver" && "$GO" build -v -mod=readonly -trimpath -ldflags "$(kube_ldflags)" \
        -o "$BIN/$1.tmp" "$2")
    mv "$BIN/$1.tmp" "$BIN/$1"
}

build_apiserver() { build_kube kube-apiserver .; }

# kubectl: upstream cmd/kubectl/kubectl.go (see apiserver/cmd/kubectl), so CI
# needs no distro kubectl (Debian 12's kubernetes-client is 1.20, too old).
build_kubectl() { build_kube kubectl ./cmd/kubectl; }

build_kubelet() { build_kube kubelet ./cmd/kubelet; }
build_controller_manager() { build_kube kube-controller-manager ./cmd/kube-controller-manager; }
build_scheduler() { build_kube kube-scheduler ./cmd/kube-scheduler; }
build_proxy() { build_kube kube-proxy ./cmd/kube-proxy; }

build_etcd() {
    (cd "$HERE/etcd" && "$GO" build -v -mod=readonly -trimpath -ldflags "-s -w" \
        -o "$BIN/etcd.tmp" .)
    mv "$BIN/etcd.tmp" "$BIN/etcd"
}

build_coredns() {
    # CoreDNS's go.mod has no replace directives: plain `go install` works. All its
    # in-tree plugins are compiled in; the Corefile chooses (kubernetes, no forward).
    GOBIN="$BIN/.coredns-tmp" "$GO" install -v -trimpath -ldflags "-s -w" \
        "github.com/coredns/coredns@$COREDNS_VERSION"
    mv "$BIN/.coredns-tmp/coredns" "$BIN/coredns"
    rmdir "$BIN/.coredns-tmp"
}

build_helm() {
    # helm's go.mod has no replace directives, so plain `go install` works.
    # -X sets the version `helm version` prints (otherwise it is taken from
    # the module's build info, which is fine too; this keeps it explicit).
    GOBIN="$BIN/.helm-tmp" "$GO" install -v -trimpath \
        -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
        "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
    mv "$BIN/.helm-tmp/helm" "$BIN/helm"
    rmdir "$BIN/.helm-tmp"
}

for item in "kube-apiserver $KUBE_VERSION build_apiserver" \
            "kubectl $KUBE_VERSION build_kubectl" \
            "etcd $ETCD_VERSION build_etcd" \
            "helm $HELM_VERSION build_helm" \
            "kube-scheduler $KUBE_VERSION build_scheduler" \
            "kube-proxy $KUBE_VERSION build_proxy" \
            "kube-controller-manager $KUBE_VERSION build_controller_manager" \
            "kubelet $KUBE_VERSION build_kubelet" \
            "coredns $COREDNS_VERSION build_coredns"; do
    read -r name version fn <<<"$item"
    wanted "$name" || continue
    if up_to_date "$name" "$version"; then
        log "$name $version: cached in $BIN"
        continue
    fi
    check_go
    log "$name $version: building with $("$GO" env GOVERSION)..."
    start=$(date +%s)
    "$fn"
    echo "$version" >"$BIN/$name.version"
    log "$name $version: built in $(( $(date +%s) - start ))s ($(du -h "$BIN/$name" | cut -f1))"
done

echo "$BIN"
