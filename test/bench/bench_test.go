package bench

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	enabled       = flag.Bool("bench.enable", false, "Run the benchmark (make bench does); make test skips it.")
	runs          = flag.Int("bench.runs", 3, "Runs of each failover measurement (the hand-off runs at least 5).")
	mass          = flag.Int("bench.mass", 1000, "The large mass failover and burst size.")
	scaleN        = flag.Int("bench.scale", 10000, "FencedLeases in the scale run (0 skips it).")
	waiting       = flag.Int("bench.scale-waiting", 3, "Waiting pods per FencedLease in the scale run.")
	only          = flag.String("bench.only", "grant,handoff,single,work,mass,burst,slots,scale", "The measurements to run, comma-separated.")
	slotsN        = flag.Int("bench.slots", 100, "Slots of the one FencedLease of the slots measurement (3 candidates a slot), against as many FencedLeases of one grant.")
	apiserverProf = flag.String("bench.apiserver-profile", "", "Where to save a CPU profile of the API server taken in the scale run's status catch-up (120 s, from a minute after the last grant), when holders' renewals take longest; its top is logged. Empty: none.")
	heapProf      = flag.String("bench.heap-profile", "", "Where to save the operator's heap profile at the end of the scale run (go tool pprof reads it); its top is logged. Empty: none.")
	finalizerHook = flag.Bool("bench.finalizer-webhook", true, "Serve the FencedLease webhook, as the webhook install (Kubernetes 1.30-1.35) does: new FencedLeases come with the operator's finalizer; false, as the default install: the operator writes it itself (one write more per new FencedLease).")
	apf           = flag.Bool("bench.apf", false, "Run the holders, client-go's candidates and the operator as service accounts (one per lock for the first two) under the shipped API Priority and Fairness objects, as in a cluster; false runs every side as system:masters, which APF exempts.")
	operatorArgs  = flag.String("bench.operator-args", "", "Extra flags for the operator, space-separated (--max-concurrent-reconciles=64, say), to measure a setting.")
	queueTimeline = flag.Bool("bench.queue-timeline", false, "Log the operator's running reconciles and ready queue by priority each second of every mass failover, from its /metrics (a scrape a second beside the failover).")
	memLimit      = flag.String("bench.operator-memory-limit", "256Mi", "The container memory limit the operator is told of, as the Deployment tells it (FENCEDLEASE_MEMORY_LIMIT, from resources.limits.memory); empty for none.")
)

func want(name string) bool { return slices.Contains(strings.Split(*only, ","), name) }

var (
	fast = timings{lease: 5 * time.Second, renew: 3333 * time.Millisecond, retry: time.Second}
	slow = timings{lease: 15 * time.Second, renew: 10 * time.Second, retry: 2 * time.Second}
)

// TestBench runs every measurement on one control plane and prints the table.
func TestBench(t *testing.T) {
	if !*enabled {
		t.Skip("the benchmark runs with make bench")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newBench(t, ctx)
	defer b.print() // what was measured, even when a later measurement fails
	rates := floors{lease: b.writeRate(), mix: b.mixRate()}

	if want("grant") {
		b.uncontended(20, fast)
	}
	if want("handoff") {
		b.handoff(fast.lease, fast, max(*runs, 5))
	}
	for _, tm := range []timings{fast, slow} {
		if !want("single") {
			break
		}
		n := *runs
		op := b.operatorFailover(1, tm.lease, n, 0)
		cg := b.clientgoFailover(1, tm, n)
		b.add(fmt.Sprintf("single failover, overshoot past lease end (lease %v; client-go %v)", tm.lease, tm),
			op.overshoot.summary(), cg.overshoot.summary(), ratio(op.overshoot.quantile(0.5), cg.overshoot.quantile(0.5)))
	}
	for _, tm := range []timings{fast, slow} {
		for _, n := range []int{1, 100} {
			if want("work") {
				b.failoverToWork(n, tm, max(*runs, 5))
			}
		}
	}
	for _, m := range []struct {
		n int
		t timings
	}{{100, fast}, {*mass, fast}, {*mass, slow}} {
		if want("mass") {
			b.massFailover(m.n, m.t, rates)
		}
	}
	if want("burst") {
		b.burst(*mass, rates)
	}
	if want("slots") {
		b.slotsFailover(*slotsN, fast.lease, *runs)
	}
	if want("scale") && *scaleN > 0 {
		b.scale(*scaleN, *waiting, time.Minute)
	}
}

func floats(fs []float64) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = fmt.Sprintf("%.2f", f)
	}
	return strings.Join(parts, ", ")
}

// massFailover runs n holders stopping at once, for the operator (lease t.lease) and for
// client-go (timings t), and adds their rows.
// floors are the API server's write rates measured in this run: Lease updates alone
// (client-go's only write), and the operator's mix.
type floors struct{ lease, mix float64 }

func (b *bench) massFailover(n int, t timings, rates floors) {
	op := b.operatorFailover(n, t.lease, *runs, 0)
	b.add(fmt.Sprintf("operator RSS after %d-lease failovers", n), b.rss(), "—", "")
	cg := b.clientgoFailover(n, t, *runs)
	what := fmt.Sprintf("%d holders stop at once (lease %v; client-go %v)", n, t.lease, t)
	b.add(what+": overshoot past lease end",
		op.overshoot.summary(), cg.overshoot.summary(), ratio(op.overshoot.quantile(0.99), cg.overshoot.quantile(0.99))+" at p99")
	floor := floorTime(n, 4, rates.mix)
	b.add(fmt.Sprintf("%s: first lease end → last next holder named (floor: %d×4 writes of the operator's mix)", what, n),
		op.span.summary(), fmt.Sprintf("client-go %s; floor %s", cg.span.summary(), ms(floor)),
		fmt.Sprintf("%s of client-go, %s of the floor (p50)", ratio(op.span.quantile(0.5), cg.span.quantile(0.5)), ratio(op.span.quantile(0.5), floor)))
	// The span above starts at the first old lease's end, and those ends lie a renew
	// interval apart: a third of the lease for a holder, client-go's retry period for a
	// leader. Counted from the stop, both sides start at the same moment.
	b.add(what+": the stop → last next holder named (the same moment on both sides)",
		op.fromStop.summary(), "client-go "+cg.fromStop.summary(),
		ratio(op.fromStop.quantile(0.5), cg.fromStop.quantile(0.5))+" of client-go (p50)")
	b.add(what+": the old leases' ends, first → last (a renew interval: the holders' D/3, client-go's retry period)",
		op.endSpread.summary(), "client-go "+cg.endSpread.summary(), "")
	if len(op.ungated) > 0 {
		b.add(what+": first lease end → last next holder's pod granted on the pod (token, no gate: when a Cold pod could start)",
			op.ungated.summary(), "—", "")
	}
	b.add(what+": writes per failover, each run (events included)", floats(op.writesPer), "client-go: "+floats(cg.writesPer), "")
	b.add(what+": holders that gave up on their own deadline in the failover, from the stop to a lease after the last next holder named (pkg/holder; client-go: leaders lost)",
		fmt.Sprintf("%d", op.gaveUpInFailover), fmt.Sprintf("%d", cg.gaveUpInFailover), "")
	b.add(what+": holders that gave up on their own deadline in the whole scenario, the first grants included (pkg/holder; client-go: leaders lost)",
		fmt.Sprintf("%d of %d grants", op.gaveUp, op.grants), fmt.Sprintf("%d of %d leaderships", cg.gaveUp, cg.grants), "")
	b.goals.judgeMass(n, t.lease, op, cg, floor)
}
