package bench

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// slotsFailover measures one FencedLease with n slots and 3n candidates (issue 49): the
// grant of every slot from the FencedLease's creation, the operator's requests per steady
// renewal, and failovers of all n slot holders at once — against n FencedLeases of one
// grant (operatorFailover) in the same run, from the same moment: the stop.
func (b *bench) slotsFailover(n int, d time.Duration, runs int) {
	ns := b.namespace(fmt.Sprintf("op-slots-%d-%ds", n, int(d.Seconds())))
	const name = "shards"
	keys := make([]string, n)
	for i := range keys {
		keys[i] = ns + "/" + fencingv1.SlotLeaseName(name, int32(i))
	}
	candidates := func(prefix string, count int) {
		pods := names(prefix, count)
		leases := make([]string, count)
		for i := range leases {
			leases[i] = name
		}
		b.createAll(b.pods(ns, pods, leases))
	}
	candidates("s0-", 3*n)
	time.Sleep(2 * time.Second) // the operator has them in its cache
	fl := b.fencedLease(ns, name, d)
	fl.Spec.Holders = int32(n)
	created := time.Now()
	if err := b.admin.Create(b.ctx, fl); err != nil {
		b.t.Fatal(err)
	}
	current := b.awaitSlots(keys, nil, created)
	granted := time.Since(created)
	b.awaitRenewed(ns, current)
	b.awaitSlotStatus(ns, name, keys)
	b.add(fmt.Sprintf("one FencedLease with %d slots, %d candidates: created → every slot's Lease names a holder (lease %v)", n, 3*n, d),
		fmt.Sprintf("%s, %.0f grants/s", ms(granted), float64(n)/granted.Seconds()), "—", "")

	// The grants' events are sent one after another by the operator's event recorder:
	// the window opens once they are out, so it counts what renewals cost.
	b.awaitQuiet(ns, 3*time.Second, 30*time.Second)
	const window = 20 * time.Second
	from, renewed := time.Now(), b.holders.renewalsIn(ns)
	time.Sleep(window)
	to, renewals := time.Now(), b.holders.renewalsIn(ns)-renewed
	req := b.operatorRequests(ns, from, to)
	b.t.Logf("steady state %s: %d renewals, operator requests %v", ns, renewals, req)
	b.add(fmt.Sprintf("operator requests per renewal, one FencedLease with %d slot holders renewing, %d waiting (lease %v, %d renewals in %v)", n, 2*n, d, renewals, window),
		fmt.Sprintf("%.3f (status writes %.3f)", per(req.total(), renewals), per(req.sum("update fencedleases/status"), renewals)), "—", "")

	var slots failover
	for r := 1; r <= runs; r++ {
		candidates(fmt.Sprintf("s%d-", r), n) // 2n wait again
		time.Sleep(2 * time.Second)
		stoppedAt := time.Now()
		for _, h := range current {
			b.holders.stop(ns, h)
		}
		next := b.awaitSlots(keys, current, stoppedAt)
		var ts []transition
		for i, k := range keys {
			if t, ok := b.leases.lastTransitionTo(k, next[i]); ok {
				ts = append(ts, t)
			}
		}
		slots.add(ts, stoppedAt, d)
		b.awaitRenewed(ns, next)
		lastAt := b.awaitSlotStatus(ns, name, keys)
		req := b.operatorRequests(ns, stoppedAt, lastAt.Add(time.Second))
		slots.writesPer = append(slots.writesPer, float64(req.writes())/float64(n))
		b.t.Logf("%s run %d: operator requests %v", ns, r, req)
		current = next
	}
	one := b.oneOfMany(ns, keys, current, d, runs, func(int, int) {}, // 2n wait already
		func() time.Time { return b.awaitSlotStatus(ns, name, keys) })
	rss := b.rss()
	size := 0
	if raw, err := json.Marshal(b.getFL(ns, name)); err == nil {
		size = len(raw)
	}
	b.quiesce(ns, current)

	single := b.operatorFailover(n, d, runs, runs)
	what := fmt.Sprintf("%d holders stop at once (lease %v): one FencedLease with %d slots; n FencedLeases of one grant", n, d, n)
	b.add(what+": the stop → last next holder named",
		slots.fromStop.summary(), "single grants "+single.fromStop.summary(),
		ratio(slots.fromStop.quantile(0.5), single.fromStop.quantile(0.5))+" of single grants (p50)")
	b.add(what+": overshoot past lease end",
		slots.overshoot.summary(), "single grants "+single.overshoot.summary(),
		ratio(slots.overshoot.quantile(0.99), single.overshoot.quantile(0.99))+" at p99")
	b.add(what+": writes per failover, each run (events included)", floats(slots.writesPer), "single grants: "+floats(single.writesPer), "")
	b.oneOfManyRows(n, d, one, *single.one)
	b.add(fmt.Sprintf("one FencedLease with %d slots: operator RSS after its failovers; the FencedLease's size", n),
		fmt.Sprintf("%s; %d bytes", rss, size), "—", "")
}

// awaitSlots waits until every slot Lease of keys names a holder, none of them one of
// old, and returns them in the order of keys; it fails the run after 10 minutes.
func (b *bench) awaitSlots(keys, old []string, since time.Time) []string {
	b.t.Helper()
	deadline := since.Add(10 * time.Minute)
	for {
		holders := make([]string, len(keys))
		done := true
		for i, k := range keys {
			holders[i] = b.leases.holderOf(k)
			if holders[i] == "" || slices.Contains(old, holders[i]) {
				done = false
			}
		}
		if done {
			return holders
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the slots' Leases did not all name a new holder within 10 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitSlotStatus waits until the status of FencedLease ns/name records, in every slot,
// the holder and token its Lease (keys, in slot order) names — the grant's status write
// may wait for the first renewal — and returns when it saw that; after a minute it logs
// and returns.
func (b *bench) awaitSlotStatus(ns, name string, keys []string) time.Time {
	b.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		fl := &fencingv1.FencedLease{}
		if err := b.statuses.fls.Get(b.ctx, client.ObjectKey{Namespace: ns, Name: name}, fl); err != nil {
			b.t.Fatal(err)
		}
		behind := 0
		for i, k := range keys {
			l := b.leases.lease(k)
			if i >= len(fl.Status.Slots) || l == nil || !slotShowsLease(fl.Status.Slots[i], l.Spec.HolderIdentity, l.Annotations[fencingv1.TokenAnnotation]) {
				behind++
			}
		}
		if behind == 0 {
			return time.Now()
		}
		if time.Now().After(deadline) {
			b.t.Logf("%s: %d slots' status still behind their Lease after a minute; counting up to now", ns, behind)
			return time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func slotShowsLease(s fencingv1.Slot, holder *string, token string) bool {
	return s.Holder != nil && holder != nil && s.Holder.PodName == *holder && fmt.Sprint(s.Holder.Token) == token
}

func (b *bench) getFL(ns, name string) *fencingv1.FencedLease {
	fl := &fencingv1.FencedLease{}
	if err := b.statuses.fls.Get(b.ctx, client.ObjectKey{Namespace: ns, Name: name}, fl); err != nil {
		b.t.Fatal(err)
	}
	return fl
}

// awaitQuiet waits until the operator has sent no request about ns for quiet, and at most
// limit.
func (b *bench) awaitQuiet(ns string, quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		now := time.Now()
		if b.operatorRequests(ns, now.Add(-quiet), now).total() == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.t.Logf("%s: the operator still sent requests %v after the grants", ns, limit)
}
