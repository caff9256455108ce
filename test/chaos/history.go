// Package chaos injects faults into a running operator (its real binary, two replicas)
// while holders on pkg/holder write through pkg/fence, records what happened, and checks
// the history against the product's guarantees. Its recorder and checker also judge the
// real-node class (test/realnode), whose faults strike holders. Times are from one
// machine's clock: the test process's, the operator's for revocations, and the holders'
// for renewals, on the same host.
package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/invariants"
)

// History is what one run recorded.
type History struct {
	// Lease is the FencedLease's lease duration.
	Lease time.Duration
	// States are the pods' state annotations as they changed (from a watch).
	States []StateChange
	// Holders are the lives of the well-behaved holders: from their grant confirmed to
	// their context ended. Zombies (holders made to ignore their context) are not here.
	Holders []Life
	// Renewals are the renewTimes the Lease showed, with the grant it named.
	Renewals []Renewal
	// Revocations are the revocations the status recorded.
	Revocations []Revocation
	// Writes are the writes holders attempted through the fence.
	Writes []Write
	// Ledger is the protected table at the end, in commit order.
	Ledger []Row
	// Faults are the faults injected; an API-server restart's End is when it was ready.
	Faults []Fault
	// Ended is when the run stopped recording.
	Ended time.Time
	// Invariants are the protocol's invariants the recorder saw broken, each with when.
	Invariants []string
}

// StateChange is a pod's state annotation as seen at At.
type StateChange struct {
	At    time.Time
	Pod   string
	UID   types.UID
	State string // Waiting, Holding, Draining, Released, Revoked; "" once deleted
	Token int64
	// Slot is the slot the pod holds (its slot annotation), of a FencedLease with slots.
	Slot int32 `json:",omitempty"`
}

// Life is a holder from the moment its grant was confirmed to the end of its context.
type Life struct {
	Pod              string
	Token            int64
	Confirmed, Ended time.Time // Ended is zero while it still holds
	Slot             int32     `json:",omitempty"`
}

// Renewal is a renewTime a holder wrote, with its grant.
type Renewal struct {
	Pod   string
	Token int64
	At    time.Time // the renewTime, from the holder's clock
	Slot  int32     `json:",omitempty"`
}

// Revocation is one the status recorded.
type Revocation struct {
	Pod    string
	Token  int64
	Reason string
	At     time.Time // the operator's clock
	Slot   int32     `json:",omitempty"`
}

// Write is one attempt to write through the fence.
type Write struct {
	Pod      string
	Token    int64
	Accepted bool
	Row      int64 // the ledger row it committed, when accepted
	Zombie   bool  // written by a holder that ignores its lost grant
	Slot     int32 `json:",omitempty"`
}

// Row is a ledger row.
type Row struct {
	ID    int64
	Token int64
	Slot  int32 `json:",omitempty"`
}

// Fault is one injected fault.
type Fault struct {
	Kind       string
	Start, End time.Time
	// Grant is what a fault of a holder must do to the grant it struck (Token); empty for
	// the faults of the operator and the control plane.
	Grant GrantFate `json:",omitempty"`
	Token int64     `json:",omitempty"`
}

// GrantFate is what a fault of a holder must do to its grant.
type GrantFate string

const (
	// GrantMoves: the holder stops renewing (frozen, cut off, its node lost); the next
	// grant is at work (its holder's first renewal) within Lease + HolderMargin of the
	// struck grant's last renewal.
	GrantMoves GrantFate = "moves"
	// GrantKept: the holder keeps renewing (its node's kubelet stopped); the grant is not
	// revoked from the fault's start to a lease after its end, or the next fault's start.
	GrantKept GrantFate = "kept"
)

// HolderMargin is how long, beyond one lease from a struck holder's last renewal, the next
// grant may take to be at work: the operator's revocation and grant, a Warm standby's
// confirmation, and one Warm standby on a lost node granted first and revoked after its
// confirmation bound (10 s on short leases), on a loaded machine.
const HolderMargin = 20 * time.Second

// CheckSlots returns every violation of the guarantees in h, the history of a FencedLease
// with holders slots: each slot's history must hold what one grant's does (Check), and
// across the slots no token is granted twice and never more than holders pods hold.
func CheckSlots(h History, holders int) []string {
	var v []string
	for slot, part := range h.BySlot() {
		for _, s := range Check(part) {
			v = append(v, fmt.Sprintf("slot %d: %s", slot, s))
		}
	}
	v = append(v, checkHolding(h.States, holders)...)
	return append(v, h.Invariants...)
}

// checkHolding replays the pods' states through the protocol's invariants
// (test/invariants): never two pods Holding (or Draining) in a slot nor more than limit in
// all, no token to two pods, no pod granted twice or holding again after its grant ended.
func checkHolding(states []StateChange, limit int) []string {
	var v []string
	c := invariants.New(replayed)
	c.SpecHolders(int32(limit))
	pods := map[types.UID]corev1.Pod{}
	for _, s := range states {
		if s.State == "" {
			delete(pods, s.UID)
		} else {
			pods[s.UID] = replayedPod(s)
		}
		all := make([]corev1.Pod, 0, len(pods))
		for _, p := range pods {
			all = append(all, p)
		}
		for _, broken := range c.Pods(all) {
			v = append(v, fmt.Sprintf("at %s: %s", s.At.Format(time.RFC3339Nano), broken))
		}
	}
	return v
}

// replayed names the FencedLease of a replayed history.
const replayed = "replayed"

// replayedPod is the pod a state change shows, as the invariants read it.
func replayedPod(s StateChange) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: s.Pod, UID: s.UID,
		Labels: map[string]string{fencingv1.LeaseLabel: replayed},
		Annotations: map[string]string{fencingv1.StateAnnotation: s.State,
			fencingv1.SlotAnnotation: strconv.FormatInt(int64(s.Slot), 10)}}}
	if s.Token > 0 {
		p.Annotations[fencingv1.TokenAnnotation] = strconv.FormatInt(s.Token, 10)
	}
	return p
}

// BySlot splits h into one history per slot; the faults and the lease go to each.
func (h History) BySlot() map[int32]History {
	parts := map[int32]*History{}
	part := func(slot int32) *History {
		if parts[slot] == nil {
			parts[slot] = &History{Lease: h.Lease, Faults: h.Faults, Ended: h.Ended}
		}
		return parts[slot]
	}
	// A pod's states after it held a slot (Released, Revoked, gone) belong to that slot.
	slotOf := map[types.UID]int32{}
	for _, s := range h.States {
		if s.State == "Holding" || s.State == "Draining" {
			slotOf[s.UID] = s.Slot
		}
		if slot, ok := slotOf[s.UID]; ok {
			part(slot).States = append(part(slot).States, s)
		}
	}
	for _, l := range h.Holders {
		part(l.Slot).Holders = append(part(l.Slot).Holders, l)
	}
	for _, r := range h.Renewals {
		part(r.Slot).Renewals = append(part(r.Slot).Renewals, r)
	}
	for _, r := range h.Revocations {
		part(r.Slot).Revocations = append(part(r.Slot).Revocations, r)
	}
	for _, w := range h.Writes {
		part(w.Slot).Writes = append(part(w.Slot).Writes, w)
	}
	for _, r := range h.Ledger {
		part(r.Slot).Ledger = append(part(r.Slot).Ledger, r)
	}
	out := map[int32]History{}
	for slot, p := range parts {
		out[slot] = *p
	}
	return out
}

// Check returns every violation of the guarantees in h.
func Check(h History) []string {
	v := slices.Clone(h.Invariants)
	v = append(v, checkStates(h.States)...)
	v = append(v, checkLedger(h)...)
	v = append(v, checkLives(h.Holders)...)
	v = append(v, checkSpurious(h)...)
	v = append(v, checkStuck(h)...)
	v = append(v, checkHolderFaults(h)...)
	return v
}

// checkStates: never two pods Holding (or Draining) at once; every token granted to one
// pod UID only (checkHolding); each newly holding token above every token before it.
func checkStates(states []StateChange) []string {
	v := checkHolding(states, 1)
	holding := map[types.UID]bool{}
	var last int64
	for _, s := range states {
		was := holding[s.UID]
		if s.State != "Holding" && s.State != "Draining" {
			delete(holding, s.UID)
			continue
		}
		holding[s.UID] = true
		if !was {
			if s.Token <= last {
				v = append(v, fmt.Sprintf("pod %s began holding token %d after token %d", s.Pod, s.Token, last))
			}
			last = max(last, s.Token)
		}
	}
	return v
}

// checkLedger: no write accepted after a newer token wrote (the ledger's tokens never go
// down in commit order), and nothing lost (every accepted write is in the ledger, and the
// ledger holds nothing else).
func checkLedger(h History) []string {
	var v []string
	c := invariants.New(replayed)
	for _, r := range h.Ledger {
		for _, broken := range c.Accepted("ledger", r.Token) {
			v = append(v, fmt.Sprintf("stale write accepted: row %d token %d: %s", r.ID, r.Token, broken))
		}
	}
	rows := map[int64]int64{}
	for _, r := range h.Ledger {
		rows[r.ID] = r.Token
	}
	accepted := 0
	for _, w := range h.Writes {
		if !w.Accepted {
			continue
		}
		accepted++
		if tok, ok := rows[w.Row]; !ok || tok != w.Token {
			v = append(v, fmt.Sprintf("accepted write of %s token %d (row %d) lost", w.Pod, w.Token, w.Row))
		}
	}
	if accepted != len(h.Ledger) {
		v = append(v, fmt.Sprintf("the ledger has %d rows, %d writes were accepted", len(h.Ledger), accepted))
	}
	return v
}

// checkLives: a well-behaved holder's context ended before its successor's grant was
// confirmed: never two live holders.
func checkLives(lives []Life) []string {
	var v []string
	sorted := slices.Clone(lives)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Token < sorted[j].Token })
	for i := 1; i < len(sorted); i++ {
		l, next := sorted[i-1], sorted[i] // its direct successor is the one that matters
		if l.Ended.IsZero() || l.Ended.After(next.Confirmed) {
			v = append(v, fmt.Sprintf("holder %s (token %d) still live when %s confirmed token %d", l.Pod, l.Token, next.Pod, next.Token))
		}
	}
	return v
}

// checkSpurious: a revocation for expiry less than a lease after a renewal of that grant.
func checkSpurious(h History) []string {
	var v []string
	for _, rv := range h.Revocations {
		if rv.Reason != "LeaseExpired" && rv.Reason != "StartupDeadlineExceeded" {
			continue
		}
		for _, rn := range h.Renewals {
			if rn.Pod == rv.Pod && rn.Token == rv.Token && rv.At.Sub(rn.At) < h.Lease-spuriousMargin {
				v = append(v, fmt.Sprintf("spurious revocation of %s token %d at %s, %v after its renewal",
					rv.Pod, rv.Token, rv.At.Format(time.RFC3339Nano), rv.At.Sub(rn.At)))
				break
			}
		}
	}
	return v
}

// spuriousMargin allows for the renewTime being taken just before the write is sent.
const spuriousMargin = 50 * time.Millisecond

// Spurious counts the spurious revocations in h.
func Spurious(h History) int { return len(checkSpurious(h)) }

// Recovery is, per fault, how long after it ended the next grant came. A fault that
// ended while a zombie held the grant is left out: its successor waits out the zombie's
// lease whatever the fault did.
func Recovery(h History) map[string][]time.Duration {
	out := map[string][]time.Duration{}
	for _, r := range recoveries(h) {
		if r.granted && !r.zombie {
			out[r.fault.Kind] = append(out[r.fault.Kind], r.took)
		}
	}
	return out
}

type recovery struct {
	fault   Fault
	took    time.Duration // fault end → next grant
	granted bool          // false: no grant came before the run ended
	zombie  bool          // the fault ended while a zombie held the grant
}

func recoveries(h History) []recovery {
	zombie := map[int64]bool{}
	for _, w := range h.Writes {
		if w.Zombie {
			zombie[w.Token] = true
		}
	}
	type grant struct {
		at    time.Time
		token int64
	}
	var grants []grant
	for _, s := range h.States {
		if s.State == "Holding" {
			grants = append(grants, grant{s.At, s.Token})
		}
	}
	var out []recovery
	for _, f := range h.Faults {
		r := recovery{fault: f}
		var held int64
		for _, g := range grants {
			if g.at.Before(f.End) {
				held = g.token
				continue
			}
			r.took, r.granted = g.at.Sub(f.End), true
			break
		}
		r.zombie = zombie[held]
		out = append(out, r)
	}
	return out
}

// nextAPIServerFault is when the first API-server fault to start after t started.
func nextAPIServerFault(faults []Fault, t time.Time) (time.Time, bool) {
	var first time.Time
	for _, f := range faults {
		if strings.HasPrefix(f.Kind, "API server") && f.Start.After(t) && (first.IsZero() || f.Start.Before(first)) {
			first = f.Start
		}
	}
	return first, !first.IsZero()
}

// stuckMargin is how long after the API server is ready again, beyond one lease (for a
// grant made before the outage to run out), the FencedLease — which always has
// candidates here — may go without a new grant.
const stuckMargin = 5 * time.Second

// checkStuck: after every API-server fault, a grant within lease + stuckMargin of the
// server being ready (or the run ended sooner) — unless the server went away again
// within that bound and before the grant: then the next fault is judged from its own end.
func checkStuck(h History) []string {
	var v []string
	bound := h.Lease + stuckMargin
	for _, r := range recoveries(h) {
		if !strings.HasPrefix(r.fault.Kind, "API server") || r.zombie {
			continue
		}
		if again, ok := nextAPIServerFault(h.Faults, r.fault.End); ok && again.Sub(r.fault.End) <= bound &&
			(!r.granted || r.fault.End.Add(r.took).After(again)) {
			continue
		}
		switch {
		case r.granted && r.took > bound:
			v = append(v, fmt.Sprintf("stuck: no grant for %v after the API server was ready at %s (%s), want within %v",
				r.took.Round(time.Millisecond), r.fault.End.Format(time.RFC3339Nano), r.fault.Kind, bound))
		case !r.granted && h.Ended.Sub(r.fault.End) > bound:
			v = append(v, fmt.Sprintf("stuck: no grant in the %v from the API server being ready at %s (%s) to the run's end, want within %v",
				h.Ended.Sub(r.fault.End).Round(time.Millisecond), r.fault.End.Format(time.RFC3339Nano), r.fault.Kind, bound))
		}
	}
	return v
}

// checkHolderFaults: after a fault that must move a grant, the next grant at work within
// Lease + HolderMargin of the struck grant's last renewal (or the run ended sooner); a
// fault that must leave a grant alone revokes nothing of it until a lease after its end
// (or the next fault).
func checkHolderFaults(h History) []string {
	var v []string
	bound := h.Lease + HolderMargin
	for _, f := range h.Faults {
		switch f.Grant {
		case GrantMoves:
			last, took, ok := holderRecovery(h, f)
			switch {
			case ok && took > bound:
				v = append(v, fmt.Sprintf("%s at %s: token %d's successor at work %v after its last renewal, want within %v",
					f.Kind, f.Start.Format(time.RFC3339Nano), f.Token, took.Round(time.Millisecond), bound))
			case !ok && h.Ended.Sub(last) > bound:
				v = append(v, fmt.Sprintf("stuck: %s at %s: no holder at work after token %d in the %v to the run's end, want within %v",
					f.Kind, f.Start.Format(time.RFC3339Nano), f.Token, h.Ended.Sub(last).Round(time.Millisecond), bound))
			}
		case GrantKept:
			until := f.End.Add(h.Lease)
			if next, ok := nextFault(h.Faults, f.Start); ok && next.Before(until) {
				until = next // the next fault may take the grant away
			}
			for _, rv := range h.Revocations {
				if rv.Token == f.Token && !rv.At.Before(f.Start) && rv.At.Before(until) {
					v = append(v, fmt.Sprintf("%s at %s: token %d revoked (%s) at %s, but its holder kept renewing",
						f.Kind, f.Start.Format(time.RFC3339Nano), f.Token, rv.Reason, rv.At.Format(time.RFC3339Nano)))
				}
			}
		}
	}
	return v
}

// holderRecovery is, for a fault that must move its grant, the struck grant's last renewal
// at or before the fault (its start when none was seen) and how long from there the next
// grant took to be at work: the first renewal of a newer token.
func holderRecovery(h History, f Fault) (last time.Time, took time.Duration, ok bool) {
	last = f.Start
	var latest time.Time
	for _, rn := range h.Renewals {
		if rn.Token == f.Token && !rn.At.After(f.Start) && rn.At.After(latest) {
			latest = rn.At
		}
	}
	if !latest.IsZero() {
		last = latest
	}
	var next time.Time
	for _, rn := range h.Renewals {
		if rn.Token > f.Token && (next.IsZero() || rn.At.Before(next)) {
			next = rn.At
		}
	}
	if next.IsZero() {
		return last, 0, false
	}
	return last, next.Sub(last), true
}

// HolderRecovery is, per fault that must move its grant, how long from the struck grant's
// last renewal its successor took to be at work.
func HolderRecovery(h History) map[string][]time.Duration {
	out := map[string][]time.Duration{}
	for _, f := range h.Faults {
		if f.Grant != GrantMoves {
			continue
		}
		if _, took, ok := holderRecovery(h, f); ok {
			out[f.Kind] = append(out[f.Kind], took)
		}
	}
	return out
}

// nextFault is when the first fault to start after t started.
func nextFault(faults []Fault, t time.Time) (time.Time, bool) {
	var first time.Time
	for _, f := range faults {
		if f.Start.After(t) && (first.IsZero() || f.Start.Before(first)) {
			first = f.Start
		}
	}
	return first, !first.IsZero()
}
