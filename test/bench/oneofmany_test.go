package bench

import (
	"fmt"
	"time"
)

// oneOfMany fails over one grant among many that keep renewing, runs times: in run r the
// holder of keys[r % len(keys)] (named holders[…]) stops alone, after addWaiting(r, i) gave
// it a waiting candidate. It counts each failover's overshoot and the operator's writes
// from the stop until awaitRecorded returns (the status records the new holder). It
// returns the failovers; holders is updated with the new holders.
func (b *bench) oneOfMany(ns string, keys, holders []string, d time.Duration, runs int,
	addWaiting func(r, i int), awaitRecorded func() time.Time) failover {
	var f failover
	for r := 1; r <= runs; r++ {
		i := (r * 37) % len(keys) // spread over the keys, not only the first ones
		addWaiting(r, i)
		time.Sleep(2 * time.Second) // the operator has it in its cache
		stoppedAt := time.Now()
		b.holders.stop(ns, holders[i])
		next := b.awaitSlots(keys[i:i+1], holders[i:i+1], stoppedAt)[0]
		t, ok := b.leases.lastTransitionTo(keys[i], next)
		if !ok {
			b.t.Fatalf("%s: no transition of %s to %s seen", ns, keys[i], next)
		}
		f.add([]transition{t}, stoppedAt, d)
		b.awaitRenewed(ns, []string{next})
		holders[i] = next
		lastAt := awaitRecorded()
		req := b.operatorRequests(ns, stoppedAt, lastAt.Add(time.Second))
		f.writesPer = append(f.writesPer, float64(req.writes()))
		b.t.Logf("%s one of %d, run %d (%s): operator requests %v", ns, len(keys), r, keys[i], req)
	}
	return f
}

// oneOfManyRows adds the rows comparing one slot failing over among n renewing with one
// FencedLease of one grant among n.
func (b *bench) oneOfManyRows(n int, d time.Duration, slots, single failover) {
	what := fmt.Sprintf("one holder of %d stops, %d renew (lease %v): a slot of one FencedLease; one of %d FencedLeases of one grant", n, n-1, d, n)
	b.add(what+": overshoot past lease end", slots.overshoot.summary(), "single grants "+single.overshoot.summary(),
		ratio(slots.overshoot.quantile(0.5), single.overshoot.quantile(0.5))+" of single grants (p50)")
	b.add(what+": writes per failover, each run (events included)", floats(slots.writesPer), "single grants: "+floats(single.writesPer), "")
}
