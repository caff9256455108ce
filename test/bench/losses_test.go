package bench

import (
	"testing"
	"time"
)

// The failover's count must take only the losses in its stretch, on either side.
func TestLossesCountsOnlyTheStretchAsked(t *testing.T) {
	start := time.Date(2026, 12, 2, 22, 0, 0, 0, time.UTC)
	var l losses
	for _, s := range []int{-30, -1, 0, 4, 10, 11} {
		l.add("a", start.Add(time.Duration(s)*time.Second))
	}
	l.add("b", start)
	if got := l.in("a"); got != 6 {
		t.Errorf("in(a) = %d, want 6", got)
	}
	if got := l.between("a", start, start.Add(10*time.Second)); got != 3 {
		t.Errorf("between(a, 0 s, 10 s) = %d, want 3 (0, 4 and 10 s; not before the stop nor after the end)", got)
	}
	if got := l.between("c", start, start.Add(time.Hour)); got != 0 {
		t.Errorf("between(c) = %d, want 0", got)
	}
}
