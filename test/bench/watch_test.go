package bench

import (
	"testing"
	"time"
)

// A Lease that named its next holder before the stop is no part of the failover.
func TestNamedSinceLeavesOutTakeoversBeforeTheStop(t *testing.T) {
	stop := time.Date(2026, 12, 2, 22, 0, 0, 0, time.UTC)
	ts := []transition{
		{to: "early", at: stop.Add(-40 * time.Second)},
		{to: "at-stop", at: stop},
		{to: "late", at: stop.Add(6 * time.Second)},
	}
	kept := namedSince(ts, stop)
	if len(kept) != 2 || kept[0].to != "at-stop" || kept[1].to != "late" {
		t.Errorf("namedSince kept %+v, want at-stop and late", kept)
	}
}
