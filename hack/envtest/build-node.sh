#!/usr/bin/env bash
# Puts what a real node of test/realnode and `make cluster` runs into $1 (default
# bin/k8s/<version>), beside the control plane of build.sh: kube-node (the kubelet and
# kube-proxy in one binary, links named after each, from the module of kube so it reuses
# the Kubernetes packages kube's build compiled), containerd with its runc shim and ctr, and
# the CNI plugins bridge, host-local, loopback and portmap under cni/. runc is Debian's
# package (it needs cgo): .ci/run installs it. A binary already present is kept.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print substr($3, 2) } $1 == "k8s.io/kubernetes" { print substr($2, 2) }' "$here/kubernetes/go.mod")
out=${1:-$here/../../bin/k8s/$version}
mkdir -p "$out/cni"
out=$(cd "$out" && pwd)
minor=${version#*.}
minor=${minor%%.*}

build() { # name dir package [go build flags]
  local name=$1 dir=$2 pkg=$3
  shift 3
  [[ -x "$out/$name" ]] && return
  echo ">> building $name into $out (first time only)" >&2
  local start=$SECONDS
  (cd "$here/$dir" && CGO_ENABLED=0 go build -trimpath "$@" -o "$out/$name.tmp" "$pkg")
  mv "$out/$name.tmp" "$out/$name"
  echo ">> built $name in $((SECONDS - start))s" >&2
}

# The Node reports the version stamped here; unstamped it says v0.0.0-master.
stamp="-w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=v$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
build kube-node kubernetes ./node -ldflags="$stamp"
for cmd in kubelet kube-proxy; do
  ln -sfn kube-node "$out/$cmd"
done
containerd=(-tags "no_btrfs no_devmapper no_zfs urfave_cli_no_docs")
build containerd node github.com/containerd/containerd/v2/cmd/containerd "${containerd[@]}"
build containerd-shim-runc-v2 node github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 "${containerd[@]}"
build ctr node github.com/containerd/containerd/v2/cmd/ctr "${containerd[@]}"
for plugin in ipam/host-local main/bridge main/loopback meta/portmap; do
  build "cni/${plugin#*/}" node "github.com/containernetworking/plugins/plugins/$plugin"
done
echo "$out"
