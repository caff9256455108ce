#!/usr/bin/env bash
# Raises the modules that the tool modules hack/envtest/kubernetes (kube, kwok) and hack/helm
# share with the binaries the tests build (the operator, the agent, the plugin, the demo) to
# the operator's versions, where they are older. Go's build cache reuses a compiled package
# only when its whole dependency graph is the same, and all of them are built the same way
# (CGO_ENABLED=0 -trimpath), so with one version of each shared module a cold machine
# compiles those packages once (the plugin: 17 s instead of 127 s after kube). Where a tool
# needs a newer version than the operator, it keeps it and says so. `make verify` runs it
# and fails when it changes a go.mod: run it and commit after a dependency update.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)

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

# align DIR PACKAGES...: raise DIR's modules for PACKAGES to the operator's versions.
align() {
  local mod=$root/$1 pass tool path want have n raise=() ahead=()
  shift
  for pass in 1 2 3; do
    # The modules of the packages the tool compiles, as its module resolves them.
    tool=$(cd "$mod" && go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}{{end}}' "$@" | sort -u)
    raise=() ahead=()
    while read -r path want have; do
      if newer "$want" "$have"; then
        raise+=("$path@$want")
      elif newer "$have" "$want"; then
        ahead+=("$path $have (the operator: $want)")
      fi
    done < <(join <(echo "$shipped") <(echo "$tool"))
    ((${#raise[@]})) || break
    echo "align: raising in ${mod#"$root"/}: ${raise[*]}" >&2
    (cd "$mod" && go get "${raise[@]}" >/dev/null && go mod tidy)
  done
  for n in "${ahead[@]}"; do
    echo "align: ${mod#"$root"/} needs a newer $n: its packages compile twice on a cold machine" >&2
  done
}

align hack/envtest/kubernetes ./kube ./node sigs.k8s.io/kwok/cmd/kwok
align hack/helm helm.sh/helm/v3/cmd/helm
