package bench

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// writeRate measures how many writes per second the API server takes: 64 writers each
// updating their own Leases for five seconds, the cheapest write there is.
func (b *bench) writeRate() float64 {
	const writers, perWriter = 64, 4
	ns := b.namespace("floor")
	leases := b.floor.CoordinationV1().Leases(ns)
	objs := make([]*coordinationv1.Lease, writers*perWriter)
	parallel(len(objs), 32, func(i int) (err error) {
		objs[i], err = leases.Create(b.ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w%d", i)}}, metav1.CreateOptions{})
		return err
	}, b.t)
	rate := b.measureRate(writers, func(w, i int) (int, error) {
		k := w*perWriter + i%perWriter
		next := objs[k].DeepCopy()
		next.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		updated, err := leases.Update(b.ctx, next, metav1.UpdateOptions{})
		if err != nil {
			return 0, err
		}
		objs[k] = updated
		return 1, nil
	})
	b.add("API server write rate (64 writers, Lease updates)", "—", fmt.Sprintf("%.0f writes/s", rate), "")
	return rate
}

// floorTime is how long the API server needs for n×perItem writes at rate.
func floorTime(n, perItem int, rate float64) time.Duration {
	return time.Duration(float64(n*perItem) / rate * float64(time.Second))
}

// failover is what one mass failover measured.
type failover struct {
	overshoot sample
	// span runs from the first lease's end to the last next holder named; ungated to the
	// last next holder's pod granted on the pod (when a Cold pod could start).
	span, ungated sample
	// fromStop runs from the stop, the same moment on both sides, to the last next holder
	// named; endSpread from the first old lease's end to the last's — a renew interval
	// wide, as the stop finds each holder somewhere between two renewals.
	fromStop, endSpread sample
	// writesPer is the operator's writes (or client-go's) per failover.
	writesPer []float64
	// one are failovers of one holder alone among the n renewing (oneOfMany), when asked.
	one *failover
	// gaveUp is how many holders (leaders) ended on their own deadline, of grants, in the
	// whole scenario (the first grants included); gaveUpInFailover those of them that did
	// in a failover: from the stop to one lease after the last next holder was named.
	gaveUp, grants, gaveUpInFailover int
	// failovers are those stretches, one per run.
	failovers []stretch
	// work is how long after the old holder's lease ran out the next one's work began: its
	// first renewal confirmed (a Cold pod with no pod start: the best case), its
	// StartWhenGranted returned (Warm), OnStartedLeading (client-go).
	work sample
}

// operatorFailover grants n FencedLeases (lease d) to simulated holders, then runs times:
// a waiting pod for each, every holder stops at once, and the watch times each next grant.
// alone > 0 adds that many failovers of one holder among the n renewing (oneOfMany) into
// the returned failover's one.
func (b *bench) operatorFailover(n int, d time.Duration, runs, alone int) failover {
	ns := fmt.Sprintf("op-failover-%d-%ds", n, int(d.Seconds()))
	ns = b.namespace(ns)
	leases := names("l", n)
	fls := make([]client.Object, n)
	for i, l := range leases {
		fls[i] = b.fencedLease(ns, l, d)
	}
	b.createAll(fls)
	current := names("h0-", n)
	b.createAll(b.pods(ns, current, leases))
	b.await(keyed(ns, leases, current), 10*time.Minute)
	b.awaitRenewed(ns, current)
	// The Lease names a grant before the status records it: let every status catch up, so
	// the steady state below counts no grant's write.
	b.awaitStatus(ns, keyed(ns, leases, current))

	var f failover
	for r := 1; r <= runs; r++ {
		next := names(fmt.Sprintf("h%d-", r), n)
		creating := time.Now()
		b.createAll(b.pods(ns, next, leases))
		created := time.Now()
		time.Sleep(2 * time.Second) // the operator has them in its cache
		if r == 1 && n > 1 {
			time.Sleep(8 * time.Second) // and has counted them waiting
			b.steadyState(ns, n, d)
		}
		stoppedAt := time.Now()
		b.t.Logf("%s run %d: before the stop, %d holders gave up while %d waiting pods were created (%v), %d after",
			ns, r, b.holders.gaveUp.between(ns, creating, created), n, created.Sub(creating).Round(time.Millisecond),
			b.holders.gaveUp.between(ns, created, stoppedAt))
		for _, h := range current {
			b.holders.stop(ns, h)
		}
		stopSampling := b.sampleQueue(fmt.Sprintf("%s run %d", ns, r), stoppedAt)
		ts := b.stopped(ns, r, b.await(keyed(ns, leases, next), 10*time.Minute), stoppedAt)
		stopSampling()
		f.add(ts, stoppedAt, d)
		first := firstLeaseEnd(ts)
		if missing := b.awaitConfirmed(ns, next, 2*time.Minute); len(missing) > 0 {
			b.t.Logf("%s run %d: %d next holders named on their Lease never confirmed (gave up or revoked first), e.g. %s; left out of the time to work",
				ns, r, len(missing), missing[0])
		}
		for _, t := range ts {
			if at := b.holders.confirmedAt(ns, t.to); !at.IsZero() {
				f.work = append(f.work, at.Sub(t.lastRenew.Add(t.duration)))
			}
		}
		// Counted until every status records its new holder, whose write may wait for the
		// first renewal: the whole failover, not the part before the last Lease write.
		lastAt := b.awaitStatus(ns, keyed(ns, leases, next))
		if at, missing := b.granted.awaitUngated(ns, next, time.Minute); missing == 0 {
			f.ungated = append(f.ungated, at.Sub(first))
		} else {
			b.t.Logf("%s run %d: %d next holders' pods never seen granted on the pod; left out of the time to the last one", ns, r, missing)
		}
		req := b.operatorRequests(ns, stoppedAt, lastAt.Add(time.Second))
		f.writesPer = append(f.writesPer, float64(req.writes())/float64(n))
		b.t.Logf("%s run %d: operator requests %v", ns, r, req)
		current = next
	}
	if alone > 0 {
		one := b.oneOfMany(ns, keysOf(ns, leases), current, d, alone,
			func(r, i int) { b.createAll(b.pods(ns, []string{fmt.Sprintf("o%d-%d", r, i)}, leases[i:i+1])) },
			func() time.Time { return b.awaitStatus(ns, keyed(ns, leases, current)) })
		f.one = &one
	}
	f.count(&b.holders.gaveUp, ns)
	b.quiesce(ns, current)
	f.grants = n * (runs + 1)
	return f
}

// keysOf are the keys (namespace/name) of the Leases named names in ns.
func keysOf(ns string, names []string) []string {
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = ns + "/" + n
	}
	return keys
}

// warmFailover is operatorFailover with Warm standbys: n FencedLeases in Warm standby, a
// running standby for each waiting with StartWhenGranted, every holder stops at once, and
// each standby's work begins when its StartWhenGranted returns.
func (b *bench) warmFailover(n int, d time.Duration, runs int) failover {
	ns := fmt.Sprintf("op-warm-%d-%ds", n, int(d.Seconds()))
	ns = b.namespace(ns)
	leases := names("l", n)
	fls := make([]client.Object, n)
	for i, l := range leases {
		fl := b.fencedLease(ns, l, d)
		fl.Spec.Standby = fencingv1.StandbyWarm
		fls[i] = fl
	}
	b.createAll(fls)
	standbys := func(prefix string) []string {
		pods := names(prefix, n)
		objs := make([]client.Object, n)
		for i := range pods {
			objs[i] = testenv.WarmCandidatePod(ns, pods[i], leases[i])
		}
		b.createAll(objs)
		for i := range pods {
			b.warm.wait(ns, leases[i], pods[i], objs[i].GetUID())
		}
		return pods
	}
	awaitWorking := func(pods []string) {
		deadline := time.Now().Add(5 * time.Minute)
		for _, p := range pods {
			for b.warm.startedAt(ns, p).IsZero() {
				if time.Now().After(deadline) {
					b.t.Fatalf("standby %s/%s never started working", ns, p)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	current := standbys("w0-")
	b.await(keyed(ns, leases, current), 10*time.Minute)
	awaitWorking(current)

	var f failover
	for r := 1; r <= runs; r++ {
		next := standbys(fmt.Sprintf("w%d-", r))
		time.Sleep(2 * time.Second) // the operator has them in its cache, each waiter its watch
		if r == 1 {
			const window = 20 * time.Second
			gets, watches := b.warm.gets.Load(), b.warm.watches.Load()
			time.Sleep(window)
			b.add(fmt.Sprintf("Warm standby waiting for its grant: requests per waiter per minute (%d waiting, lease %v)", n, d),
				fmt.Sprintf("%.3f reads, %.3f watches opened; 1 watch held open each",
					per(int(b.warm.gets.Load()-gets), n)/window.Minutes(), per(int(b.warm.watches.Load()-watches), n)/window.Minutes()),
				"client-go: see its waiters' row", "")
		}
		stoppedAt := time.Now()
		for _, h := range current {
			b.warm.stop(ns, h)
		}
		ts := b.stopped(ns, r, b.await(keyed(ns, leases, next), 10*time.Minute), stoppedAt)
		f.add(ts, stoppedAt, d)
		awaitWorking(next)
		for _, t := range ts {
			f.work = append(f.work, b.warm.startedAt(ns, t.to).Sub(t.lastRenew.Add(t.duration)))
		}
		current = next
	}
	for _, h := range current {
		b.warm.stop(ns, h)
	}
	return f
}

// failoverToWork compares, at n holders stopping at once, when work resumes: Warm
// standbys, Cold ones (best case: no pod start), and client-go's OnStartedLeading.
func (b *bench) failoverToWork(n int, t timings, runs int) {
	warm := b.warmFailover(n, t.lease, runs)
	cold := b.operatorFailover(n, t.lease, runs, 0)
	cg := b.clientgoFailover(n, t, runs)
	what := fmt.Sprintf("failover to work, %d at once: old lease's end → next holder's work begins (lease %v; client-go %v)", n, t.lease, t)
	b.add(what+", Warm (hold/StartWhenGranted returns)", warm.work.summary(), cg.work.summary(),
		ratio(warm.work.quantile(0.99), cg.work.quantile(0.99))+" at p99")
	b.add(what+", Cold, best case (first renewal, no pod start; a kubelet adds scheduling, image pull, container start)",
		cold.work.summary(), cg.work.summary(), ratio(cold.work.quantile(0.99), cg.work.quantile(0.99))+" at p99")
}

// steadyState counts the operator's requests while n holders renew and n pods wait.
func (b *bench) steadyState(ns string, n int, d time.Duration) {
	const window = 20 * time.Second
	from, renewed, cpu := time.Now(), b.holders.renewalsIn(ns), b.startCPU()
	renewalRoundTrips.take(ns)
	time.Sleep(window)
	to, renewals := time.Now(), b.holders.renewalsIn(ns)-renewed
	b.add(fmt.Sprintf("renewal round trip while %d holders renew (lease %v)", n, d), renewalRoundTrips.take(ns).summary(), "client-go: see its leaders' row", "")
	b.add(fmt.Sprintf("CPU while %d holders renew (lease %v) and %d pods wait", n, d, n), cpu.String(), "—", "")
	req := b.operatorRequests(ns, from, to)
	b.t.Logf("steady state %s: %d renewals, operator requests %v", ns, renewals, req)
	b.add(fmt.Sprintf("operator requests per renewal, %d holders renewing, %d waiting (lease %v, %d renewals in %v)", n, n, d, renewals, window),
		fmt.Sprintf("%.3f (reads %.3f, status writes %.3f)", per(req.total(), renewals), per(req.total()-req.writes(), renewals), per(req.sum("update fencedleases/status"), renewals)),
		"client-go: see its leaders' row", "")
	others := req.total() - req.sum("update fencedleases/status")
	b.add(fmt.Sprintf("operator requests per waiting pod per minute (%d waiting; all but the status writes above)", n),
		fmt.Sprintf("%.3f", per(others, n)/window.Minutes()), "client-go: see its waiters' row", "")
}

// quiesce stops the holders left, so the next scenario runs alone.
func (b *bench) quiesce(ns string, holders []string) {
	for _, h := range holders {
		b.holders.stop(ns, h)
	}
}

// clientgoFailover runs n client-go locks with two candidates each, and times as above:
// every leader stops at once, the watch times each next leader.
func (b *bench) clientgoFailover(n int, t timings, runs int) failover {
	ns := fmt.Sprintf("cg-failover-%d-%ds", n, int(t.lease.Seconds()))
	ns = b.namespace(ns)
	leases := names("l", n)
	leaders := make([]*elector, n)
	parallel(n, 32, func(i int) (err error) {
		leaders[i], err = runElector(b.ctx, b.cgLeader, ns, leases[i], leases[i]+"-c0", t, false)
		if err == nil {
			<-leaders[i].started
		}
		return err
	}, b.t)
	var f failover
	for r := 1; r <= runs; r++ {
		waiters := make([]*elector, n)
		parallel(n, 32, func(i int) (err error) {
			waiters[i], err = runElector(b.ctx, b.cgWaiter, ns, leases[i], fmt.Sprintf("%s-c%d", leases[i], r), t, false)
			return err
		}, b.t)
		time.Sleep(2 * t.retry) // each waiter has looked at its lock
		if r == 1 && n > 1 {
			b.clientgoSteadyState(ns, n, t)
		}
		stoppedAt := time.Now()
		parallel(n, n, func(i int) error { leaders[i].stop(); return nil }, b.t)
		want := map[string]string{}
		for i, l := range leases {
			want[ns+"/"+l] = waiters[i].identity
		}
		ts := b.stopped(ns, r, b.await(want, 10*time.Minute), stoppedAt)
		f.add(ts, stoppedAt, t.lease)
		started := map[string]time.Time{}
		for _, w := range waiters {
			<-w.started
			started[w.identity] = w.startedAt
		}
		for _, t := range ts {
			f.work = append(f.work, started[t.to].Sub(t.lastRenew.Add(t.duration)))
		}
		req := b.requestsOf(waiterUser, ns, stoppedAt, latest(ts).Add(time.Second))
		f.writesPer = append(f.writesPer, float64(req.writes())/float64(n))
		leaders = waiters
	}
	f.count(&lostLeaders, ns)
	parallel(n, n, func(i int) error { leaders[i].stop(); return nil }, b.t)
	f.grants = n * (runs + 1)
	return f
}

// clientgoSteadyState counts client-go's requests while n leaders renew and n wait.
func (b *bench) clientgoSteadyState(ns string, n int, t timings) {
	const window = 20 * time.Second
	from, cpu := time.Now(), b.startCPU()
	renewalRoundTrips.take(ns)
	time.Sleep(window)
	to := time.Now()
	b.add(fmt.Sprintf("client-go %v: renewal round trip while %d leaders renew", t, n), "—", renewalRoundTrips.take(ns).summary(), "")
	b.add(fmt.Sprintf("client-go %v: CPU while %d leaders renew and %d candidates wait", t, n, n), "—", cpu.String(), "")
	leaders := b.requestsOf(leaderUser, ns, from, to)
	waiters := b.requestsOf(waiterUser, ns, from, to)
	b.t.Logf("client-go steady state %s: leaders %v, waiters %v", ns, leaders, waiters)
	b.add(fmt.Sprintf("client-go %v: requests per leader per minute (%d leaders)", t, n), "—",
		fmt.Sprintf("%.1f (%.1f writes)", per(leaders.total(), n)/window.Minutes(), per(leaders.writes(), n)/window.Minutes()), "")
	b.add(fmt.Sprintf("client-go %v: requests per waiting candidate per minute (%d waiting)", t, n), "0 (pods wait gated; see above)",
		fmt.Sprintf("%.1f", per(waiters.total(), n)/window.Minutes()), "")
}

// stretch is a span of time.
type stretch struct{ from, to time.Time }

// count sets gaveUp and gaveUpInFailover from l, once the last failover's stretch is
// over (a holder gives up within a lease of its last renewal).
func (f *failover) count(l *losses, ns string) {
	if k := len(f.failovers); k > 0 {
		time.Sleep(time.Until(f.failovers[k-1].to))
	}
	f.gaveUp = l.in(ns)
	for _, s := range f.failovers {
		f.gaveUpInFailover += l.between(ns, s.from, s.to)
	}
}

// stopped keeps the transitions of the failover that began at stoppedAt: a Lease that
// named its next holder before then had lost the old one on its own (it gave up under
// load) and is no part of it — its old lease ended long before, and would stretch the
// failover back to it.
func (b *bench) stopped(ns string, run int, ts []transition, stoppedAt time.Time) []transition {
	kept := namedSince(ts, stoppedAt)
	if early := len(ts) - len(kept); early > 0 {
		b.t.Logf("%s run %d: %d of %d Leases named their next holder before the stop (the old one had given up); left out of the failover's times",
			ns, run, early, len(ts))
	}
	if len(kept) == 0 {
		b.t.Fatalf("%s run %d: every Lease named its next holder before the stop: nothing to time", ns, run)
	}
	return kept
}

// add records one run's failover: it began at stoppedAt; its holders' leases are d.
func (f *failover) add(ts []transition, stoppedAt time.Time, d time.Duration) {
	f.failovers = append(f.failovers, stretch{stoppedAt, latest(ts).Add(d)})
	for _, t := range ts {
		f.overshoot = append(f.overshoot, t.overshoot())
	}
	first, last := leaseEnds(ts)
	f.span = append(f.span, latest(ts).Sub(first))
	f.endSpread = append(f.endSpread, last.Sub(first))
	f.fromStop = append(f.fromStop, latest(ts).Sub(stoppedAt))
}

// firstLeaseEnd is the earliest moment any of the old holders' leases could end.
func firstLeaseEnd(ts []transition) time.Time {
	first, _ := leaseEnds(ts)
	return first
}

// leaseEnds are the earliest and the latest moment the old holders' leases could end.
func leaseEnds(ts []transition) (first, last time.Time) {
	first = ts[0].lastRenew.Add(ts[0].duration)
	last = first
	for _, t := range ts {
		end := t.lastRenew.Add(t.duration)
		if end.Before(first) {
			first = end
		}
		if end.After(last) {
			last = end
		}
	}
	return first, last
}

// handoff times release → next holder named, runs times, for the operator and client-go.
func (b *bench) handoff(d time.Duration, t timings, runs int) {
	ns := "op-handoff"
	ns = b.namespace(ns)
	b.createAll([]client.Object{b.fencedLease(ns, "h", d)})
	current := "h0"
	b.createAll(b.pods(ns, []string{current}, []string{"h"}))
	b.await(map[string]string{ns + "/h": current}, time.Minute)
	b.awaitRenewed(ns, []string{current})
	var op sample
	for r := 1; r <= runs; r++ {
		next := fmt.Sprintf("h%d", r)
		b.createAll(b.pods(ns, []string{next}, []string{"h"}))
		time.Sleep(time.Second)
		sent, err := b.holders.release(ns, current)
		if err != nil {
			b.t.Fatal(err)
		}
		ts := b.await(map[string]string{ns + "/h": next}, time.Minute)
		op = append(op, ts[0].at.Sub(sent))
		b.awaitRenewed(ns, []string{next})
		current = next
	}
	b.quiesce(ns, []string{current})

	cns := "cg-handoff"
	cns = b.namespace(cns)
	leader, err := runElector(b.ctx, b.cgLeader, cns, "h", "c0", t, true)
	if err != nil {
		b.t.Fatal(err)
	}
	<-leader.started
	var cg sample
	for r := 1; r <= runs; r++ {
		waiter, err := runElector(b.ctx, b.cgWaiter, cns, "h", fmt.Sprintf("c%d", r), t, true)
		if err != nil {
			b.t.Fatal(err)
		}
		time.Sleep(2 * t.retry)
		released := time.Now()
		leader.stop()
		ts := b.await(map[string]string{cns + "/h": waiter.identity}, time.Minute)
		cg = append(cg, ts[0].at.Sub(released))
		leader = waiter
	}
	leader.stop()
	b.add(fmt.Sprintf("hand-off: release → next holder named (lease %v; client-go %v, ReleaseOnCancel)", d, t),
		op.summary(), cg.summary(), ratio(op.quantile(0.5), cg.quantile(0.5)))
}

// uncontended times pod created → granted on idle FencedLeases, and client-go's fresh
// lock acquired.
func (b *bench) uncontended(runs int, t timings) {
	ns := "op-grant"
	ns = b.namespace(ns)
	leases := names("g", runs)
	fls := make([]client.Object, runs)
	for i, l := range leases {
		fls[i] = b.fencedLease(ns, l, 15*time.Second)
	}
	b.createAll(fls)
	time.Sleep(2 * time.Second)
	var op sample
	for i, l := range leases {
		start := time.Now()
		b.createAll(b.pods(ns, []string{fmt.Sprintf("p%d", i)}, []string{l}))
		ts := b.await(map[string]string{ns + "/" + l: fmt.Sprintf("p%d", i)}, time.Minute)
		op = append(op, ts[0].at.Sub(start))
		time.Sleep(100 * time.Millisecond)
	}
	b.quiesce(ns, names("p", runs))

	cns := "cg-grant"
	cns = b.namespace(cns)
	var cg sample
	for i := range runs {
		start := time.Now()
		e, err := runElector(b.ctx, b.cgLeader, cns, fmt.Sprintf("g%d", i), "c0", t, true)
		if err != nil {
			b.t.Fatal(err)
		}
		ts := b.await(map[string]string{fmt.Sprintf("%s/g%d", cns, i): "c0"}, time.Minute)
		cg = append(cg, ts[0].at.Sub(start))
		e.stop()
		time.Sleep(100 * time.Millisecond)
	}
	b.add("uncontended grant: pod created → granted (client-go: fresh lock acquired)", op.summary(), cg.summary(), ratio(op.quantile(0.99), cg.quantile(0.99))+" at p99")
}

// burst creates n FencedLeases at once, each with a pod already waiting, and measures
// grants per second and the operator's requests per grant.
func (b *bench) burst(n int, rates floors) {
	ns := fmt.Sprintf("op-burst-%d", n)
	ns = b.namespace(ns)
	leases := names("b", n)
	pods := names("p", n)
	b.createAll(b.pods(ns, pods, leases))
	time.Sleep(2 * time.Second)
	fls := make([]client.Object, n)
	for i, l := range leases {
		fls[i] = b.fencedLease(ns, l, 15*time.Second)
	}
	start := time.Now()
	b.createAll(fls)
	ts := b.await(keyed(ns, leases, pods), 10*time.Minute)
	took := latest(ts).Sub(start)
	// Counted until every status records its grant, which may follow the Lease by up to
	// the first renewal's wait: the whole grant, not the part before the last Lease write.
	lastAt := b.awaitStatus(ns, keyed(ns, leases, pods))
	req := b.operatorRequests(ns, start, lastAt.Add(time.Second))
	b.t.Logf("burst %d: operator requests %v", n, req)
	floor := floorTime(n, 4, rates.mix)
	b.add(fmt.Sprintf("%d FencedLeases created at once, a pod waiting for each: grants per second (all granted after)", n),
		fmt.Sprintf("%.0f/s (%s)", float64(n)/took.Seconds(), ms(took)),
		fmt.Sprintf("floor at 4 writes of the operator's mix per grant: %.0f/s (%s)", float64(n)/floor.Seconds(), ms(floor)), ratio(took, floor)+" of the floor")
	// The Lease comes first (P1); the pods follow.
	if ungated, missing := b.granted.awaitUngated(ns, pods, time.Minute); missing == 0 {
		b.add(fmt.Sprintf("%d FencedLeases created at once: last pod granted on the pod (token, no gate: when a Cold pod could start)", n),
			ms(ungated.Sub(start)), "—", "")
	}
	b.add(fmt.Sprintf("operator requests per grant (%d new FencedLeases; includes the first renewal's status write)", n),
		fmt.Sprintf("%.2f: %s", per(req.total(), n), breakdown(req, n)), "—", "")
	b.goals.judgeBurst(n, took, req)
	b.quiesce(ns, pods)
}

// scale grants n FencedLeases, each with waiting pods, and reports the operator's memory
// and metrics.
func (b *bench) scale(n, waiting int, d time.Duration) {
	ns := fmt.Sprintf("op-scale-%d", n)
	ns = b.namespace(ns)
	leases := names("s", n)
	var pods []client.Object
	for w := 0; w <= waiting; w++ {
		pods = append(pods, b.pods(ns, names(fmt.Sprintf("p%d-", w), n), leases)...)
	}
	created := time.Now()
	b.createAll(pods)
	b.t.Logf("scale: %d pods created in %v", len(pods), time.Since(created))
	fls := make([]client.Object, n)
	for i, l := range leases {
		fls[i] = b.fencedLease(ns, l, d)
	}
	start := time.Now()
	b.createAll(fls)
	ts := b.await(keyed(ns, leases, make([]string, n)), 30*time.Minute)
	took := latest(ts).Sub(start)
	defer b.profileAPIServer(time.Minute, 120)()
	b.add(fmt.Sprintf("%d FencedLeases (lease %v), %d pods each: all granted after", n, d, waiting+1), ms(took), "—", "")
	lostGranting := b.holders.gaveUp.in(ns)
	b.add(fmt.Sprintf("holders that gave up on their own deadline while %d were granted", n),
		fmt.Sprintf("%d of %d", lostGranting, n), "—", "")
	// The Lease is each grant's record; the status follows with the first renewal, at
	// follow-up priority. The window below is the steady state only once every one has.
	recorded := b.awaitStatusWithin(ns, keyed(ns, leases, make([]string, n)), 10*time.Minute)
	b.add(fmt.Sprintf("%d FencedLeases: every status records its grant after (the Lease records it first)", n), ms(recorded.Sub(start)), "—", "")
	time.Sleep(d) // every holder has renewed a few times; the operator has recorded it
	from, renewed, lostBefore := time.Now(), b.holders.renewalsIn(ns), b.holders.gaveUp.in(ns)
	time.Sleep(d)
	req := b.operatorRequests(ns, from, time.Now())
	renewals := b.holders.renewalsIn(ns) - renewed
	// A holder lost after the grants is a failover in the window below: its writes are
	// churn, not what a renewal costs. Say how many, so the row explains itself.
	b.add(fmt.Sprintf("holders that gave up on their own deadline after the %d grants: until the window below; in it", n),
		fmt.Sprintf("%d; %d", lostBefore-lostGranting, b.holders.gaveUp.in(ns)-lostBefore), "—", "")
	b.add(fmt.Sprintf("operator requests per renewal at %d (%d renewals in %v, a lease after the last status write)", n, renewals, d),
		fmt.Sprintf("%.3f (%s)", per(req.total(), renewals), breakdown(req, renewals)), "—", "")
	// Where a holder's time went when it gave up: on this side, waiting for a connection,
	// or in the API server.
	for _, line := range renewalRoundTrips.timeline(ns, start, time.Now(), 30*time.Second, func(from, to time.Time) string {
		return fmt.Sprintf("%d holders gave up", b.holders.gaveUp.between(ns, from, to))
	}) {
		b.t.Logf("scale: renewals sent %s", line)
	}
	size, series := b.metricsSize()
	b.add(fmt.Sprintf("operator RSS with %d FencedLeases and %d pods", n, n*(waiting+1)), b.rss(), "—", "")
	b.add(fmt.Sprintf("/metrics at %d FencedLeases", n), fmt.Sprintf("%.2f MB, %d series", float64(size)/1e6, series), "—", "")
	b.saveHeapProfile()
}

func keyed(ns string, leases, holders []string) map[string]string {
	out := make(map[string]string, len(leases))
	for i, l := range leases {
		out[ns+"/"+l] = holders[i]
	}
	return out
}

func latest(ts []transition) time.Time {
	var last time.Time
	for _, t := range ts {
		if t.at.After(last) {
			last = t.at
		}
	}
	return last
}

func per(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// breakdown is "verb resource: count per item" for each kind of request.
func breakdown(r requests, n int) string {
	var keys []string
	for k := range r {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, per(r[k], n)))
	}
	return strings.Join(parts, ", ")
}

// mixRate measures the API server's write rate for the operator's kind of writes: 64
// writers each cycling through a FencedLease status update, a Lease update and a pod
// patch, for five seconds. Pods and CRD objects cost the server more than Leases do, so
// this is the fair floor for the operator; the Lease rate is the fair one for client-go.
func (b *bench) mixRate() float64 {
	const writers = 64
	ns := b.namespace("floor-mix")
	fls := make([]*fencingv1.FencedLease, writers)
	pods := make([]client.Object, writers)
	var objs []client.Object
	for i := range writers {
		fls[i] = b.fencedLease(ns, fmt.Sprintf("m%d", i), 15*time.Second)
		pods[i] = testenv.CandidatePod(ns, fmt.Sprintf("p%d", i), "none")
		objs = append(objs, fls[i], pods[i])
	}
	b.createAll(objs)
	leases := b.floor.CoordinationV1().Leases(ns)
	mixLeases := make([]*coordinationv1.Lease, writers)
	parallel(writers, 32, func(w int) (err error) {
		mixLeases[w], err = leases.Create(b.ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m%d", w)}}, metav1.CreateOptions{})
		return err
	}, b.t)
	rate := b.measureRate(writers, func(w, i int) (int, error) {
		// A patch: the operator writes these FencedLeases' status too.
		status := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"status":{"fencingToken":0,"waiting":%d}}`, i))
		if err := b.admin.Status().Patch(b.ctx, fls[w], status); err != nil {
			return 0, err
		}
		next := mixLeases[w].DeepCopy()
		next.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		updated, err := leases.Update(b.ctx, next, metav1.UpdateOptions{})
		if err != nil {
			return 0, err
		}
		mixLeases[w] = updated
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{"bench":"%d"}}}`, i))
		if err := b.admin.Patch(b.ctx, pods[w], patch); err != nil {
			return 0, err
		}
		return 3, nil
	})
	b.add("API server write rate, the operator's mix (FencedLease status, Lease, pod patch; 64 writers)", "—", fmt.Sprintf("%.0f writes/s", rate), "")
	return rate
}

// measureRate runs writers goroutines for five seconds, each calling cycle(w, 0), cycle(w,
// 1), …, and returns the writes per second the cycles reported.
func (b *bench) measureRate(writers int, cycle func(w, i int) (int, error)) float64 {
	var writes atomic.Int64
	until := time.Now().Add(5 * time.Second)
	parallel(writers, writers, func(w int) error {
		for i := 0; time.Now().Before(until); i++ {
			n, err := cycle(w, i)
			if err != nil {
				return err
			}
			writes.Add(int64(n))
		}
		return nil
	}, b.t)
	return float64(writes.Load()) / 5
}
