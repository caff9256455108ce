package chaos

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// good is a history with two clean hand-overs and a rejected zombie write.
func good() History {
	return History{
		Lease: 2 * time.Second,
		States: []StateChange{
			{At: at(0), Pod: "a", UID: "ua", State: "Holding", Token: 1},
			{At: at(900), Pod: "a", UID: "ua", State: "Released", Token: 1},
			{At: at(910), Pod: "b", UID: "ub", State: "Holding", Token: 2},
			{At: at(3000), Pod: "b", UID: "ub", State: "Revoked", Token: 2},
			{At: at(3010), Pod: "c", UID: "uc", State: "Holding", Token: 3},
		},
		Holders: []Life{
			{Pod: "a", Token: 1, Confirmed: at(10), Ended: at(890)},
			{Pod: "b", Token: 2, Confirmed: at(920), Ended: at(2500)},
			{Pod: "c", Token: 3, Confirmed: at(3020)},
		},
		Renewals:    []Renewal{{Pod: "b", Token: 2, At: at(920)}},
		Revocations: []Revocation{{Pod: "b", Token: 2, Reason: "LeaseExpired", At: at(2990)}},
		Writes: []Write{
			{Pod: "a", Token: 1, Accepted: true, Row: 1},
			{Pod: "b", Token: 2, Accepted: true, Row: 2},
			{Pod: "c", Token: 3, Accepted: true, Row: 3},
			{Pod: "a", Token: 1, Zombie: true}, // a late write from a, refused
		},
		Ledger: []Row{{ID: 1, Token: 1}, {ID: 2, Token: 2}, {ID: 3, Token: 3}},
		Faults: []Fault{{Kind: "leader SIGKILL", Start: at(2000), End: at(2800)}},
	}
}

func TestAGoodHistoryPasses(t *testing.T) {
	if v := Check(good()); len(v) != 0 {
		t.Fatalf("violations in a good history: %v", v)
	}
	if r := Recovery(good())["leader SIGKILL"]; len(r) != 1 || r[0] != 210*time.Millisecond {
		t.Fatalf("recovery = %v, want 210ms (fault end → grant of c)", r)
	}
	moved := good()
	moved.Faults = append(moved.Faults, Fault{Kind: "holder frozen", Start: at(1000), End: at(5000), Grant: GrantMoves, Token: 2})
	moved.Renewals = append(moved.Renewals, Renewal{Pod: "c", Token: 3, At: at(3030)})
	if v := Check(moved); len(v) != 0 {
		t.Fatalf("violations in a good history with a holder fault: %v", v)
	}
	if r := HolderRecovery(moved)["holder frozen"]; len(r) != 1 || r[0] != 2110*time.Millisecond {
		t.Fatalf("holder recovery = %v, want 2.11s (b's last renewal → c's first)", r)
	}
	// A grant kept through a kubelet stop, then taken by the next fault, before a lease passed.
	kept := good()
	kept.Faults = append(kept.Faults, Fault{Kind: "holder's kubelet stopped", Start: at(1000), End: at(2000), Grant: GrantKept, Token: 2},
		Fault{Kind: "holder frozen", Start: at(1500), End: at(2900), Grant: GrantMoves, Token: 2})
	if v := Check(kept); len(v) != 0 {
		t.Fatalf("a revocation after the next fault counted against the kept grant: %v", v)
	}
	zombie := good()
	zombie.Writes = append(zombie.Writes, Write{Pod: "b", Token: 2, Zombie: true})
	if r := Recovery(zombie)["leader SIGKILL"]; len(r) != 0 {
		t.Fatalf("a fault that ended under a zombie counted: %v", r)
	}
}

// A series of restarts: the server went away again before the bound, and the grant came
// soon after its last return. The first restart is judged no more; the last one is.
func TestARestartCutShortByTheNextIsJudgedFromTheNext(t *testing.T) {
	h := good()
	back := at(3100)
	h.Faults = append(h.Faults,
		Fault{Kind: "API server restarts, 4-10 s apart", Start: at(3000), End: back},
		Fault{Kind: "API server restarts, 4-10 s apart", Start: back.Add(4100 * time.Millisecond), End: back.Add(8800 * time.Millisecond)})
	h.States[4].At = back.Add(10250 * time.Millisecond) // c's grant, 1.45 s after the second return
	h.Holders[2].Confirmed = h.States[4].At.Add(10 * time.Millisecond)
	if v := checkStuck(h); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
	h.States[4].At = back.Add(8800*time.Millisecond + h.Lease + stuckMargin + time.Millisecond)
	if v := checkStuck(h); len(v) != 1 || !strings.Contains(v[0], "stuck: no grant for") {
		t.Fatalf("a grant too late after the last return: violations %v, want one", v)
	}
}

func TestEachBadHistoryIsFlagged(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(*History)
		want    string
	}{
		{"two pods holding", func(h *History) {
			h.States = append(h.States[:1], h.States[2:]...) // a never released
		}, "all Holding or Draining"},
		{"a token to two pods", func(h *History) {
			h.States[4].Token = 2
		}, "token 2 names two pods"},
		{"a token that went down", func(h *History) {
			h.States[4].Token, h.States[4].UID = 1, "ua2"
		}, "began holding token 1 after token 2"},
		{"a stale write accepted after a newer one", func(h *History) {
			h.Ledger = append(h.Ledger, Row{ID: 4, Token: 2})
			h.Writes[3].Accepted, h.Writes[3].Row = true, 4
		}, "stale write accepted: row 4 token 2"},
		{"an accepted write lost", func(h *History) {
			h.Ledger = h.Ledger[:2]
		}, "token 3 (row 3) lost"},
		{"a row nobody wrote", func(h *History) {
			h.Ledger = append(h.Ledger, Row{ID: 9, Token: 3})
		}, "the ledger has 4 rows, 3 writes were accepted"},
		{"a holder live after its successor confirmed", func(h *History) {
			h.Holders[1].Ended = at(3500)
		}, "holder b (token 2) still live when c confirmed token 3"},
		{"a holder that never ended", func(h *History) {
			h.Holders[0].Ended = time.Time{}
		}, "holder a (token 1) still live"},
		{"no grant long after the API server was back", func(h *History) {
			h.Faults = append(h.Faults, Fault{Kind: "API server restart", Start: at(3000), End: at(3100)})
			h.Ended = at(3100).Add(h.Lease + stuckMargin + time.Millisecond)
		}, "stuck: no grant in the"},
		{"a grant too late after the API server was back", func(h *History) {
			h.Faults = append(h.Faults, Fault{Kind: "API server restarts, 30-60 s apart", Start: at(3000), End: at(3100)})
			h.States[4].At = at(3100).Add(h.Lease + stuckMargin + time.Millisecond) // c's grant
		}, "stuck: no grant for"},
		{"a grant too late after the API server was back, and before it went away again", func(h *History) {
			back := at(3100)
			h.Faults = append(h.Faults, Fault{Kind: "API server restarts, 4-10 s apart", Start: at(3000), End: back},
				Fault{Kind: "API server restarts, 4-10 s apart", Start: back.Add(h.Lease + stuckMargin + 2*time.Millisecond), End: back.Add(10 * time.Second)})
			h.States[4].At = back.Add(h.Lease + stuckMargin + time.Millisecond)
		}, "stuck: no grant for"},
		{"a holder fault whose grant moved too late", func(h *History) {
			h.Faults = append(h.Faults, Fault{Kind: "holder frozen", Start: at(1000), End: at(5000), Grant: GrantMoves, Token: 2})
			h.Renewals = append(h.Renewals, Renewal{Pod: "c", Token: 3, At: at(920).Add(h.Lease + HolderMargin + time.Millisecond)})
		}, "holder frozen at"},
		{"a holder fault whose grant never moved", func(h *History) {
			h.Faults = append(h.Faults, Fault{Kind: "holder frozen", Start: at(1000), End: at(5000), Grant: GrantMoves, Token: 2})
			h.Ended = at(920).Add(h.Lease + HolderMargin + time.Millisecond)
		}, "stuck: holder frozen at"},
		{"a holder fault that must keep its grant, revoked", func(h *History) {
			h.Faults = append(h.Faults, Fault{Kind: "holder's kubelet stopped", Start: at(2100), End: at(2500), Grant: GrantKept, Token: 2})
		}, "token 2 revoked (LeaseExpired)"},
		{"a spurious revocation", func(h *History) {
			h.Renewals = append(h.Renewals, Renewal{Pod: "b", Token: 2, At: at(2000)})
		}, "spurious revocation of b token 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := good()
			tc.corrupt(&h)
			v := Check(h)
			if !strings.Contains(strings.Join(v, "\n"), tc.want) {
				t.Fatalf("want a violation %q, got %v", tc.want, v)
			}
		})
	}
}

// goodSlots is a FencedLease with two slots: slot 0's tokens 1 then 3, slot 1's 2 then 4;
// the ledger interleaves the slots, each slot's part rising.
func goodSlots() History {
	return History{
		Lease: 2 * time.Second,
		States: []StateChange{
			{At: at(0), Pod: "a", UID: "ua", State: "Holding", Token: 1, Slot: 0},
			{At: at(10), Pod: "b", UID: "ub", State: "Holding", Token: 2, Slot: 1},
			{At: at(900), Pod: "a", UID: "ua", State: "Released", Token: 1, Slot: 0},
			{At: at(910), Pod: "c", UID: "uc", State: "Holding", Token: 3, Slot: 0},
			{At: at(950), Pod: "b", UID: "ub", State: "Released", Token: 2, Slot: 1},
			{At: at(960), Pod: "d", UID: "ud", State: "Holding", Token: 4, Slot: 1},
		},
		Holders: []Life{
			{Pod: "a", Token: 1, Confirmed: at(5), Ended: at(890)},
			{Pod: "b", Token: 2, Confirmed: at(15), Ended: at(940), Slot: 1},
			{Pod: "c", Token: 3, Confirmed: at(920)},
			{Pod: "d", Token: 4, Confirmed: at(970), Slot: 1},
		},
		Writes: []Write{
			{Pod: "b", Token: 2, Accepted: true, Row: 1, Slot: 1},
			{Pod: "a", Token: 1, Accepted: true, Row: 2},
			{Pod: "c", Token: 3, Accepted: true, Row: 3},
			{Pod: "d", Token: 4, Accepted: true, Row: 4, Slot: 1},
			{Pod: "a", Token: 1, Zombie: true}, // refused in slot 0 after token 3
		},
		Ledger: []Row{{ID: 1, Token: 2, Slot: 1}, {ID: 2, Token: 1}, {ID: 3, Token: 3}, {ID: 4, Token: 4, Slot: 1}},
	}
}

func TestSlotHistories(t *testing.T) {
	if v := CheckSlots(goodSlots(), 2); len(v) != 0 {
		t.Fatalf("violations in a good history of two slots: %v", v)
	}
	if v := Check(goodSlots()); len(v) == 0 {
		t.Fatal("judged as one grant, two slots are two pods holding at once: the per-slot checker is what tells")
	}
	for _, tc := range []struct {
		name    string
		corrupt func(*History)
		want    string
	}{
		{"two pods holding one slot", func(h *History) { h.States[1].Slot = 0 }, `slot "0": pods [a b] all Holding`},
		{"a token granted in two slots", func(h *History) { h.States[5].Token = 3 }, "token 3 names two pods"},
		{"more pods holding than slots", func(h *History) {
			h.States = append(h.States, StateChange{At: at(980), Pod: "e", UID: "ue", State: "Holding", Token: 5, Slot: 2})
		}, "3 pods Holding or Draining, more than spec.holders 2"},
		{"a slot's stale write accepted", func(h *History) {
			h.Ledger = append(h.Ledger, Row{ID: 5, Token: 1})
			h.Writes[4].Accepted, h.Writes[4].Row = true, 5
		}, "slot 0: stale write accepted: row 5 token 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := goodSlots()
			tc.corrupt(&h)
			if v := CheckSlots(h, 2); !strings.Contains(strings.Join(v, "\n"), tc.want) {
				t.Fatalf("want a violation %q, got %v", tc.want, v)
			}
		})
	}
}

// The recorder checks the protocol's invariants at every event its watches deliver, and
// the history carries what they found.
func TestTheRecorderChecksTheInvariantsAtEveryEvent(t *testing.T) {
	r := newRecorder("singleton")
	pod := func(state string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "ua",
			Labels:      map[string]string{fencingv1.LeaseLabel: "singleton"},
			Annotations: map[string]string{fencingv1.StateAnnotation: state, fencingv1.TokenAnnotation: "1"}}}
	}
	lease := func(token string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "singleton",
			Labels: map[string]string{fencingv1.LeaseLabel: "singleton"}, Annotations: map[string]string{fencingv1.TokenAnnotation: token}}}
	}
	r.pod(pod("Holding"), false)
	r.pod(pod("Revoked"), false)
	r.lease(lease("2"), "singleton")
	var clean History
	r.Into(&clean)
	if len(clean.Invariants) > 0 {
		t.Fatalf("violations in a good run: %v", clean.Invariants)
	}
	r.pod(pod("Holding"), false)
	r.lease(lease("1"), "singleton")
	var h History
	r.Into(&h)
	got := strings.Join(Check(h), "\n")
	for _, want := range []string{"pod a is Holding again after its grant ended", "Lease singleton: its token went down from 2 to 1"} {
		if !strings.Contains(got, want) {
			t.Errorf("violations %q, want one saying %q", got, want)
		}
	}
}
