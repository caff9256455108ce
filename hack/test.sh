#!/usr/bin/env bash
# make test's runner. The real-node suite starts first and alone, until its cluster is up
# and the bundle installed (REALNODE_READY); then every other package, and lint, beside
# it. Started at once, the six long packages' control planes and builds made the real-node
# setup take 80 s instead of 30, on the suite's critical path.
#
# Usage: hack/test.sh BIN GO-TEST-FLAGS... -- PACKAGES...
# The real-node suite's output follows the others'; lint's follows last. Exits non-zero
# when any of them failed.
set -uo pipefail
bin=$1
shift
flags=()
while (($#)) && [[ $1 != -- ]]; do flags+=("$1"); shift; done
shift
packages=()
for p in "$@"; do [[ $p == ./test/realnode || $p == */test/realnode ]] || packages+=("$p"); done

ready=$bin/realnode.ready
rm -f "$ready"
REALNODE_READY=$ready go test "${flags[@]}" ./test/realnode > "$bin/realnode.log" 2>&1 &
realnode=$!
started=$SECONDS
while [[ ! -e $ready ]] && kill -0 "$realnode" 2>/dev/null && ((SECONDS - started < 300)); do sleep 1; done
echo "test: the real-node cluster was up after $((SECONDS - started))s; the other packages start"

${MAKE:-make} --no-print-directory lint > "$bin/lint.log" 2>&1 &
lint=$!
# The other packages expand ./... here, so the real-node suite is not run twice.
go test "${flags[@]}" $(go list "${packages[@]}" | grep -v '/test/realnode$') -coverprofile cover.out
others=$?
wait "$realnode"
realnoded=$?
cat "$bin/realnode.log"
wait "$lint"
linted=$?
echo "--- make lint:"
cat "$bin/lint.log"
((linted == 0)) || echo "make test: lint failed (above)"
((others == 0 && realnoded == 0 && linted == 0))
