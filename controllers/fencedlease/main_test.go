package fencedlease

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// TestMain sets make test's defaults before any test runs (the long tests run side by
// side, so none may set a flag while another reads them):
//   - -test.parallel 8: the envtest suite, which mostly waits on leases and the API
//     server, runs beside the explorations (generated histories, crash points), which use
//     the CPU and take turns (oneExplorationAtATime); the default, the CPU count (2 here),
//     could queue the suite behind them.
//   - -rapid.checks 50: make test's share of generated histories; make chaos runs ten
//     thousand.
//   - -rapid.steps 80: twenty-odd actions, one of them the operator's pass: rapid's 30
//     steps on average would see about one pass a history.
func TestMain(m *testing.M) {
	flag.Parse()
	// Through the flag's value, not flag.Set: Ginkgo refuses a -test.parallel given on
	// the command line (it does not run its specs in parallel), and this is not one.
	if f := flag.Lookup("test.parallel"); !flagSet(f.Name) {
		_ = f.Value.Set("8")
	}
	for name, value := range map[string]string{"rapid.checks": "50", "rapid.steps": "80"} {
		if flagSet(name) {
			continue
		}
		if err := flag.Set(name, value); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}

// flagSet is true when the command line set flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// explorations is the turn of the CPU-bound explorations: one at a time, beside the
// envtest suite, so they load make test's machine no more than when they ran alone.
var explorations = make(chan struct{}, 1)

// explorationsApartEnv, when set, tells a run under the race detector to leave the
// explorations out: make test runs them in a run of their own without it (hack/test.sh).
// Each drives the reconciler from one goroutine, so the detector has nothing to find in
// them that the envtest suite, which runs the same reconciler concurrently under it, does
// not; it made them three times as costly (118 CPU-seconds against 40), on a machine whose
// CPU sets make test's length.
const explorationsApartEnv = "FENCEDLEASE_EXPLORATIONS_APART"

// oneExplorationAtATime runs the calling test in parallel with the envtest suite and
// waits for its turn among the explorations.
func oneExplorationAtATime(t *testing.T) {
	if raceDetector && os.Getenv(explorationsApartEnv) != "" {
		t.Skip("make test runs the explorations apart, without the race detector (" + explorationsApartEnv + ", hack/test.sh)")
	}
	t.Parallel()
	explorations <- struct{}{}
	t.Cleanup(func() { <-explorations })
}
