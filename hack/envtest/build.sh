#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver, etcd) from Go modules into
# $1 (default bin/k8s/<version>). setup-envtest downloads prebuilt binaries, which a
# machine without general internet access cannot do; the Go module proxy is reachable.
# A binary already present is kept, so a warm run costs nothing.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
version=$(sed -n 's/^require k8s.io\/kubernetes v\(.*\)$/\1/p' "$here/kube-apiserver/go.mod")
out=${1:-$here/../../bin/k8s/$version}
mkdir -p "$out"
out=$(cd "$out" && pwd)

build() { # name dir package
  local name=$1 dir=$2 pkg=$3
  if [[ -x "$out/$name" ]]; then
    return
  fi
  echo ">> building $name into $out (first time only; kube-apiserver takes ~5 min cold on 2 cores)" >&2
  local start=$SECONDS
  (cd "$here/$dir" && CGO_ENABLED=0 go build -trimpath -o "$out/$name.tmp" "$pkg")
  mv "$out/$name.tmp" "$out/$name"
  echo ">> built $name in $((SECONDS - start))s" >&2
}

build etcd etcd go.etcd.io/etcd/server/v3
build kube-apiserver kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
# envtest looks for kubectl beside the others only for its own kubectl helper; not needed.
echo "$out"
