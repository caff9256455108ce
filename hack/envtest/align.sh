#!/usr/bin/env bash
# Raises the modules hack/envtest/kubernetes shares with the binaries the tests build (the
# operator, the agent, the plugin, the demo) to the operator's versions, where they are older.
# Go's build cache reuses a compiled package only when its whole dependency graph is the
# same, so with one version of each shared module the tests' builds reuse most of what
# kube's build compiled on a cold machine (the plugin: 17 s instead of 127 s). Where this
# module needs a newer version than the operator, it keeps it and says so. `make verify` runs
# it and fails when it changes go.mod: run it and commit after a dependency update.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
mod=$root/hack/envtest/kubernetes

# The modules, with the operator's versions, of every package the tests build into binaries.
shipped=$(cd "$root" && go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}' \
  ./cmd ./cmd/agent ./cmd/kubectl-fencedlease ./cmd/demo ./cmd/invoice-scheduler | sort -u)

# newer A B: A is a later version than B (semver: a pre-release or pseudo-version comes
# before its release).
newer() {
  local a=${1%%+*} b=${2%%+*}
  local ab=${a%%-*} bb=${b%%-*}
  if [[ "$ab" != "$bb" ]]; then
    [[ "$(printf '%s\n%s\n' "${ab#v}" "${bb#v}" | sort -V | tail -n 1)" == "${ab#v}" ]]
  elif [[ "$a" == "$ab" || "$b" == "$bb" ]]; then
    [[ "$a" == "$ab" && "$b" != "$bb" ]]
  else
    [[ "$a" > "$b" ]]
  fi
}

for pass in 1 2 3; do
  # The modules of the packages kube and kwok compile, as this module resolves them.
  envtest=$(cd "$mod" && go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}{{end}}' \
    ./kube sigs.k8s.io/kwok/cmd/kwok | sort -u)
  older=() newer=()
  while read -r path want have; do
    if newer "$want" "$have"; then
      older+=("$path@$want")
    elif newer "$have" "$want"; then
      newer+=("$path $have (the operator: $want)")
    fi
  done < <(join <(echo "$shipped") <(echo "$envtest"))
  ((${#older[@]})) || break
  echo "align: raising in hack/envtest/kubernetes: ${older[*]}" >&2
  (cd "$mod" && go get "${older[@]}" >/dev/null && go mod tidy)
done
for n in "${newer[@]}"; do
  echo "align: hack/envtest/kubernetes needs a newer $n: its packages compile twice on a cold machine" >&2
done
