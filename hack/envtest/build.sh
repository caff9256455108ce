#!/usr/bin/env bash
# Puts the control plane the tests run into $1 (default bin/k8s/<version>): etcd and
# kube-apiserver, kube-scheduler and kube-controller-manager, kwok, which plays the nodes,
# and the S3 and Kafka servers of the fences' tests (versitygw, kfake).
#
# First it asks setup-envtest (built from hack/tools) to download etcd and kube-apiserver
# for the same minor version: seconds, where the internet is reachable. Where it is not
# (only the Go module proxy), it builds them from Go modules instead (kube-apiserver takes
# ~10 min cold on 2 cores). kube-scheduler and kube-controller-manager are always built (no
# prebuilt envtest binaries exist for them), as one multi-call binary with a link per
# command; kwok from the same module, so it reuses the Kubernetes packages kube's build
# compiled. That module has the operator's versions of the modules they share (align.sh),
# so the tests' own builds of the operator and the plugin reuse them too. It says which it
# did. A binary already present is kept, so a warm run costs nothing. ENVTEST_DOWNLOAD=0
# skips the download; ENVTEST_INDEX names another setup-envtest index.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# The k8s.io/kubernetes version, whether go.mod requires it alone or in a block.
version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print substr($3, 2) } $1 == "k8s.io/kubernetes" { print substr($2, 2) }' "$here/kubernetes/go.mod")
[[ -n "$version" ]] || { echo "build.sh: no k8s.io/kubernetes version in $here/kubernetes/go.mod" >&2; exit 1; }
out=${1:-$here/../../bin/k8s/$version}
mkdir -p "$out"
out=$(cd "$out" && pwd)

build() { # name dir package [go build flags]
  local name=$1 dir=$2 pkg=$3
  shift 3
  if [[ -x "$out/$name" ]]; then
    return
  fi
  echo ">> building $name into $out (first time only; kube takes ~10 min cold on 2 cores)" >&2
  local start=$SECONDS
  (cd "$here/$dir" && CGO_ENABLED=0 go build -trimpath "$@" -o "$out/$name.tmp" "$pkg")
  mv "$out/$name.tmp" "$out/$name"
  echo ">> built $name in $((SECONDS - start))s" >&2
}

# download fetches etcd and kube-apiserver with setup-envtest; false when it cannot.
download() {
  local tools="$here/../tools" setup="$here/../../bin/setup-envtest" tmp got
  [[ -x "$setup" ]] || (cd "$tools" && go build -o "$setup" sigs.k8s.io/controller-runtime/tools/setup-envtest) || return 1
  tmp=$(mktemp -d)
  if ! got=$(timeout 300 "$setup" use "${version%.*}.x" --bin-dir "$tmp" -p path ${ENVTEST_INDEX:+--index "$ENVTEST_INDEX"} 2>"$tmp/err") ||
    [[ ! -x "$got/etcd" || ! -x "$got/kube-apiserver" ]]; then
    echo ">> setup-envtest could not download ${version%.*}.x: $(tail -n 1 "$tmp/err")" >&2
    rm -rf "$tmp"
    return 1
  fi
  for bin in etcd kube-apiserver; do
    [[ -x "$out/$bin" ]] || cp "$got/$bin" "$out/$bin"
  done
  rm -rf "$tmp"
  echo ">> downloaded etcd and kube-apiserver ($(basename "$got")) with setup-envtest into $out" >&2
}

if [[ ! -e "$out/kube-apiserver" || ! -e "$out/etcd" ]]; then
  if [[ "${ENVTEST_DOWNLOAD:-1}" != 0 ]] && download; then
    :
  else
    echo ">> building etcd and kube-apiserver from Go modules instead" >&2
  fi
fi
# Kubernetes' binaries report the version stamped here (a Node's kubelet version, the API
# server's /version, which helm's kubeVersion check reads); unstamped they say v0.0.0-master.
minor=${version#*.}
minor=${minor%%.*}
stamp="-w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=v$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

build etcd etcd go.etcd.io/etcd/server/v3
# envtest and test/cluster find each command by its own name.
if [[ -f "$out/kube-apiserver" && ! -L "$out/kube-apiserver" ]]; then
  # kube-apiserver was downloaded: build the rest without it, unless a full kube is here.
  nodes=kube
  [[ -x "$out/kube" ]] || { nodes=kube-nodes; build kube-nodes kubernetes ./kube -tags=noapiserver -ldflags="$stamp"; }
else
  build kube kubernetes ./kube -ldflags="$stamp"
  ln -sfn kube "$out/kube-apiserver"
  nodes=kube
fi
for cmd in kube-scheduler kube-controller-manager; do
  ln -sfn "$nodes" "$out/$cmd"
done
build kwok kubernetes sigs.k8s.io/kwok/cmd/kwok
# The servers of the S3 and Kafka fences' tests: versitygw (S3) and franz-go's kfake, run
# as a broker process of its own by hack/envtest/kfake (no Kafka broker can be installed here).
build versitygw versitygw github.com/versity/versitygw/cmd/versitygw
build kfake kfake .

# With REAL_NODES=1 (make nodes), what a real node of test/realnode and make cluster runs:
# kube-node (the kubelet and kube-proxy in one binary, links named after each, from the
# module of kube so it reuses the packages kube's build compiled), containerd with its runc
# shim and ctr, and the CNI plugins bridge, host-local, loopback and portmap under cni/.
# runc is Debian's package (it needs cgo): .ci/run installs it.
if [[ "${REAL_NODES:-0}" == 1 ]]; then
  build kube-node kubernetes ./node -ldflags="$stamp"
  for cmd in kubelet kube-proxy; do
    ln -sfn kube-node "$out/$cmd"
  done
  containerd=(-tags "no_btrfs no_devmapper no_zfs urfave_cli_no_docs")
  for cmd in containerd containerd-shim-runc-v2 ctr; do
    build "$cmd" node "github.com/containerd/containerd/v2/cmd/$cmd" "${containerd[@]}"
  done
  mkdir -p "$out/cni"
  for plugin in ipam/host-local main/bridge main/loopback meta/portmap; do
    build "cni/${plugin#*/}" node "github.com/containernetworking/plugins/plugins/$plugin"
  done
fi
echo "$out"
