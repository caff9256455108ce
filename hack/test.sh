#!/usr/bin/env bash
# make test's runner. The real-node suite starts first and alone, until its cluster is up
# and the bundle installed (REALNODE_READY); then every other package, and lint, beside
# it. Started at once, the six long packages' control planes and builds made the real-node
# setup take 80 s instead of 30, on the suite's critical path. The controller's
# explorations run apart from the others, without the race detector (below).
#
# Usage: hack/test.sh BIN GO-TEST-FLAGS... -- PACKAGES...
# The explorations' and the real-node suite's output follow the others'; lint's follows
# last. Exits non-zero when any of them failed.
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

# The real-node suite mostly waits (about 300 CPU-seconds in 400 s alone), on holders with
# leases of a few seconds and on the kubelets; the others could use both CPUs the whole
# time. They run niced, so the real-node suite gets the CPU when it asks for it and the
# others take the rest, instead of the two slowing each other evenly.
later=(nice -n 10)
"${later[@]}" ${MAKE:-make} --no-print-directory lint > "$bin/lint.log" 2>&1 &
lint=$!
# The controller's explorations (generated histories, crash points, stale views) drive it
# from one goroutine and use the CPU: they run apart, without the race detector, which
# tripled their cost; the race run leaves them out. Built as the binaries the tests run are
# (CGO_ENABLED=0 -trimpath), so a cold run compiles the operator's dependencies no third
# way. controllers/fencedlease's TestExplorationsApartAreNamed keeps this list whole.
explorations='^(TestGeneratedHistories|TestEveryCrashPointOfAPass|TestEveryPassOnAStaleViewAndTwice|TestEveryCrashPointOnTheAPIServer)$'
norace=()
for f in "${flags[@]}"; do [[ $f == -race ]] || norace+=("$f"); done
CGO_ENABLED=0 "${later[@]}" go test -trimpath "${norace[@]}" -run "$explorations" ./controllers/fencedlease > "$bin/explorations.log" 2>&1 &
apart=$!
# The other packages expand ./... here, so the real-node suite is not run twice.
FENCEDLEASE_EXPLORATIONS_APART=1 "${later[@]}" go test "${flags[@]}" $(go list "${packages[@]}" | grep -v '/test/realnode$') -coverprofile cover.out
others=$?
wait "$apart"
explored=$?
echo "--- the controller's explorations, without the race detector:"
cat "$bin/explorations.log"
wait "$realnode"
realnoded=$?
cat "$bin/realnode.log"
wait "$lint"
linted=$?
echo "--- make lint:"
cat "$bin/lint.log"
((linted == 0)) || echo "make test: lint failed (above)"
((explored == 0)) || echo "make test: the explorations failed (above)"
((others == 0 && explored == 0 && realnoded == 0 && linted == 0))
