package bench

import (
	"strings"
	"testing"
	"time"
)

func secs(ds ...float64) sample {
	var s sample
	for _, d := range ds {
		s = append(s, time.Duration(d*float64(time.Second)))
	}
	return s
}

// A failover's writes meet the goal at 4 per failover and not above, in every run.
func TestGoalFailoverWritesIsTheWorstRun(t *testing.T) {
	g := goals{}
	g.judgeMass(100, 5*time.Second, failover{writesPer: []float64{4, 4}}, failover{writesPer: []float64{4.5}}, time.Second)
	if v := g.verdict(goalFailoverWrites); v != "met" {
		t.Errorf("4.00 per failover: %s, want met", v)
	}
	g.judgeMass(1000, 15*time.Second, failover{writesPer: []float64{4, 7}}, failover{}, time.Second)
	if v := g.verdict(goalFailoverWrites); v != "**not met**" {
		t.Errorf("one run at 7.00: %s, want not met", v)
	}
}

// 1,000 at once meets its goal only when both halves hold: no later than client-go from
// the stop, and within 1.5× the floor from the first lease end.
func TestGoalMassFailoverNeedsBothHalves(t *testing.T) {
	floor := 10 * time.Second
	cg := failover{fromStop: secs(22.5)}
	for _, c := range []struct {
		name           string
		fromStop, span float64
		met            bool
	}{
		{"sooner than client-go, within the floor", 20, 14, true},
		{"as soon as client-go, at 1.5× the floor", 22.5, 15, true},
		{"later than client-go", 23, 12, false},
		{"past 1.5× the floor", 20, 15.5, false},
	} {
		g := goals{}
		g.judgeMass(1000, 15*time.Second, failover{fromStop: secs(c.fromStop), span: secs(c.span)}, cg, floor)
		if got := g.verdict(goalMassSlow) == "met"; got != c.met {
			t.Errorf("%s: %s", c.name, g.verdict(goalMassSlow))
		}
		if v := g.verdict(goalMassFast); v != "not measured in this run" {
			t.Errorf("%s: a 15 s lease judged the 5 s goal: %s", c.name, v)
		}
	}
}

// The holders that gave up are judged at 5 s in the failover, not in the setup; the
// overshoot at 100 × 5 s only.
func TestGoalGaveUpAndOvershootApplyWhereTheIssueSays(t *testing.T) {
	g := goals{}
	g.judgeMass(1000, 15*time.Second, failover{gaveUpInFailover: 5, fromStop: secs(1), span: secs(1)}, failover{fromStop: secs(1)}, time.Second)
	if v := g.verdict(goalGaveUp); v != "not measured in this run" {
		t.Errorf("a 15 s lease judged the 5 s goal: %s", v)
	}
	g.judgeMass(1000, 5*time.Second, failover{gaveUpInFailover: 3, gaveUp: 400, fromStop: secs(1), span: secs(1)},
		failover{gaveUpInFailover: 3, gaveUp: 10, fromStop: secs(1)}, time.Second)
	if v := g.verdict(goalGaveUp); v != "met" {
		t.Errorf("3 against 3 in the failover: %s, want met (the setup's losses are not the goal's)", v)
	}
	g.judgeMass(1000, 5*time.Second, failover{gaveUpInFailover: 4, fromStop: secs(1), span: secs(1)},
		failover{gaveUpInFailover: 3, fromStop: secs(1)}, time.Second)
	if v := g.verdict(goalGaveUp); v != "**not met**" {
		t.Errorf("4 against 3: %s, want not met", v)
	}
	g.judgeMass(100, 5*time.Second, failover{overshoot: secs(0.1, 1.6)}, failover{overshoot: secs(1, 3.2)}, time.Second)
	if v := g.verdict(goalOvershoot); v != "met" {
		t.Errorf("p99 1.6 s against 3.2 s: %s, want met", v)
	}
	g.judgeMass(100, 5*time.Second, failover{overshoot: secs(1.7)}, failover{overshoot: secs(3.2)}, time.Second)
	if v := g.verdict(goalOvershoot); v != "**not met**" {
		t.Errorf("p99 1.7 s against 3.2 s: %s, want not met", v)
	}
}

// The burst counts its writes without the events, and needs the rate too.
func TestGoalBurstCountsWritesApartFromEvents(t *testing.T) {
	req := requests{"create leases": 1000, "patch pods": 1000, "update fencedleases/status": 1000, "create events": 2000}
	for _, c := range []struct {
		took float64
		req  requests
		met  bool
	}{
		{8, req, true},  // 125/s, 3 writes and 2 events
		{9, req, false}, // 111/s
		{8, requests{"create leases": 1000, "patch pods": 1000, "update fencedleases/status": 1000, "update fencedleases": 1000}, false},
	} {
		g := goals{}
		g.judgeBurst(1000, time.Duration(c.took*float64(time.Second)), c.req)
		if got := g.verdict(goalBurst) == "met"; got != c.met {
			t.Errorf("%v s, %v: %s", c.took, c.req, g[goalBurst][0].measured)
		}
	}
}

// Every goal is a row, in the issue's order, those not measured said so.
func TestGoalsTableHasEveryGoal(t *testing.T) {
	g := goals{}
	g.judgeBurst(1000, 8*time.Second, requests{"create leases": 1000})
	table := g.table()
	last := -1
	for _, gt := range goalTargets {
		i := strings.Index(table, "| "+gt.what+" |")
		if i < 0 || i < last {
			t.Fatalf("%q missing or out of order in\n%s", gt.what, table)
		}
		last = i
	}
	if !strings.Contains(table, "| 1000: 125/s; 1.00 writes and 0.00 events per grant | met |") {
		t.Errorf("the burst row:\n%s", table)
	}
	if strings.Count(table, "not measured in this run") != len(goalTargets)-1 {
		t.Errorf("want every other goal not measured:\n%s", table)
	}
}
