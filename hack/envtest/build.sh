#!/usr/bin/env bash
# Builds the control plane the tests run from Go modules into $1 (default
# bin/k8s/<version>): etcd; kube-apiserver, kube-scheduler and kube-controller-manager as one
# multi-call binary `kube` with a link per command (the Kubernetes packages they share are
# compiled and linked once); and kwok, which plays the nodes. setup-envtest downloads
# prebuilt binaries, which a machine without general internet access cannot do; the Go
# module proxy is reachable. A binary already present is kept, so a warm run costs nothing.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# The k8s.io/kubernetes version, whether go.mod requires it alone or in a block.
version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print substr($3, 2) } $1 == "k8s.io/kubernetes" { print substr($2, 2) }' "$here/kubernetes/go.mod")
[[ -n "$version" ]] || { echo "build.sh: no k8s.io/kubernetes version in $here/kubernetes/go.mod" >&2; exit 1; }
out=${1:-$here/../../bin/k8s/$version}
mkdir -p "$out"
out=$(cd "$out" && pwd)

build() { # name dir package
  local name=$1 dir=$2 pkg=$3
  if [[ -x "$out/$name" ]]; then
    return
  fi
  echo ">> building $name into $out (first time only; kube takes ~10 min cold on 2 cores)" >&2
  local start=$SECONDS
  (cd "$here/$dir" && CGO_ENABLED=0 go build -trimpath -o "$out/$name.tmp" "$pkg")
  mv "$out/$name.tmp" "$out/$name"
  echo ">> built $name in $((SECONDS - start))s" >&2
}

build etcd etcd go.etcd.io/etcd/server/v3
build kube kubernetes ./kube
build kwok kwok sigs.k8s.io/kwok/cmd/kwok
# envtest and test/cluster find each command by its own name.
for cmd in kube-apiserver kube-scheduler kube-controller-manager; do
  ln -sfn kube "$out/$cmd"
done
echo "$out"
