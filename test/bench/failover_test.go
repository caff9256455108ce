package bench

import (
	"testing"
	"time"
)

// A failover is timed three ways: from the first old lease's end, from the stop, and the
// ends' own spread, which a longer renew interval widens on its own.
func TestFailoverTimesFromTheStopAndFromTheFirstLeaseEnd(t *testing.T) {
	stop := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	d := 15 * time.Second
	ts := []transition{
		{lastRenew: stop.Add(-5 * time.Second), duration: d, at: stop.Add(12 * time.Second)},
		{lastRenew: stop.Add(-1 * time.Second), duration: d, at: stop.Add(20 * time.Second)},
		{lastRenew: stop.Add(-3 * time.Second), duration: d, at: stop.Add(14 * time.Second)},
	}
	var f failover
	f.add(ts, stop, d)
	if got := f.span[0]; got != 10*time.Second {
		t.Errorf("span = %v, want 10s (the first lease ended at +10 s, the last named at +20 s)", got)
	}
	if got := f.fromStop[0]; got != 20*time.Second {
		t.Errorf("fromStop = %v, want 20s", got)
	}
	if got := f.endSpread[0]; got != 4*time.Second {
		t.Errorf("endSpread = %v, want 4s (leases ended at +10 s and +14 s)", got)
	}
	if got := f.failovers[0]; !got.from.Equal(stop) || !got.to.Equal(stop.Add(20*time.Second+d)) {
		t.Errorf("stretch = %+v, want the stop to a lease after the last named", got)
	}
}
