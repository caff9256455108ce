package decision

import (
	"maps"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// grantKey names one grant: the pod it went to and its token. Every grant has its own,
// so a memory of one grant is never mistaken for another's.
type grantKey struct {
	uid   types.UID
	token int64
}

// Renewal is when this process last saw grant (uid, token) renew.
type Renewal struct {
	UID   types.UID
	Token int64
	// RenewTime is the Lease's RenewTime as the holder wrote it: compared for change
	// only, never against this process's clock.
	RenewTime *metav1.MicroTime
	// ObservedAt is when this process saw RenewTime change, or first looked at the grant;
	// zero before its first look. It carries a monotonic reading, so wall-clock steps do
	// not move a deadline.
	ObservedAt time.Time
	// SeenRenewing: ObservedAt is a renewal this process saw happen, not its first look.
	SeenRenewing bool
}

// Observe is r after a look, at at, at the RenewTime the Lease shows for the grant (nil:
// the Lease does not show it). A RenewTime different from the last one seen counts as a
// renewal at at; the first look counts as one too, which gives every holder a full
// duration after a restart. A nil RenewTime is never a renewal, but it still starts the
// clock of a grant looked at for the first time.
func (r Renewal) Observe(renewTime *metav1.MicroTime, at time.Time) Renewal {
	switch {
	case r.ObservedAt.IsZero():
		return Renewal{UID: r.UID, Token: r.Token, RenewTime: renewTime, ObservedAt: at}
	case renewTime != nil && !renewTime.Equal(r.RenewTime):
		r.RenewTime, r.ObservedAt, r.SeenRenewing = renewTime, at, true
	}
	return r
}

// GrantRecord is all this process remembers of one grant, on its own clock.
type GrantRecord struct {
	Renewal
	// Settled: the last pass kept the grant with nothing of it waiting for a renewal, so
	// a renewal is observed as its Lease event arrives and queues no pass (renewals.go).
	Settled bool
	// HandoffSince is when this process asked the grant to hand off, or first saw it
	// asked; zero when it is not.
	HandoffSince time.Time
	// Revoking is the revocation this process decided and began on the Lease (X3), until
	// the status records it (X4); zero before.
	Revoking PendingRevocation
	// Newer is the last answer to "which waiting pod is of a newer revision of the
	// holder's workload", for the candidates it was asked about: asked again only when
	// they change, and still known when the holder pod is gone.
	Newer NewerRevisionAnswer
	// DelaySince is when the lock-delay after this grant's revocation began (X8): when
	// this process revoked it, or first saw it revoked.
	DelaySince time.Time
	// GrantedOnLeaseAt is when this process wrote the grant on the Lease ahead of the
	// status (G2 on an idle FencedLease).
	GrantedOnLeaseAt time.Time
}

func (g GrantRecord) Key() grantKey { return grantKey{g.UID, g.Token} }

// NewerRevisionAnswer is a remembered newerRevision lookup: successor (empty: none) for
// the candidates whose UIDs, in order, make up candidates.
type NewerRevisionAnswer struct {
	Candidates string
	Successor  types.UID
}

// PendingRevocation is a revocation decided with its reason and lateness, kept so a
// reconcile that finishes it after a failed status write records what was decided.
type PendingRevocation struct {
	Reason   fencingv1.RevocationReason
	message  string
	Lateness time.Duration
	// At is when it was decided, on this clock: the revocation's time and the start of
	// its lock-delay, however much later the status records it.
	At time.Time
	// handedOverAt is when this process's compare-and-swap also named the next grant on
	// the Lease (the hand-over); zero when it only cleared it. The status write that
	// records both waits from here for the new holder's first renewal (StatusCoalesce).
	handedOverAt time.Time
	// PodsFollowed: that hand-over's pass also marked the pods (X5); a Warm successor's
	// pass writes the Lease alone (P1), and the old holder's pod is marked later.
	PodsFollowed bool
}

// Recall is what a pass knows of one FencedLease's grants: read once when it begins
// (a copy), and written back once when it ends (remember).
type Recall map[grantKey]GrantRecord

// Of is the record of grant (uid, token): empty, with its key, when there is none.
func (c Recall) Of(uid types.UID, token int64) GrantRecord {
	if g, ok := c[grantKey{uid, token}]; ok {
		return g
	}
	return GrantRecord{Renewal: Renewal{UID: uid, Token: token}}
}

// GrantMemory holds, per FencedLease and slot, the records of the grants it still needs.
type GrantMemory struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	ByLease map[types.NamespacedName]map[int32]Recall
	// due is, per FencedLease with slots, the slot whose timer its last pass set: the
	// pass that timer brings judges it first (N5).
	due map[types.NamespacedName]int32
}

func NewGrantMemory(c clock.PassiveClock) *GrantMemory {
	return &GrantMemory{clock: c, ByLease: map[types.NamespacedName]map[int32]Recall{}, due: map[types.NamespacedName]int32{}}
}

// Due is the slot of FencedLease key whose timer its last pass set, if any.
func (m *GrantMemory) Due(key types.NamespacedName) (int32, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	slot, ok := m.due[key]
	return slot, ok
}

// SetDue records slot as the one whose timer the pass of FencedLease key set; ok false:
// no slot's.
func (m *GrantMemory) SetDue(key types.NamespacedName, slot int32, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ok {
		m.due[key] = slot
	} else {
		delete(m.due, key)
	}
}

// Read is a copy of what is remembered of the grants of slot key.
func (m *GrantMemory) Read(key SlotKey) Recall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.ByLease[key.Lease][key.Slot])
}

// Write replaces what is remembered of slot key with next, a pass's outcome. A renewal
// that a Lease event recorded while the pass ran (RenewedOnEvent) is newer than the
// pass's own look, and is kept.
func (m *GrantMemory) Write(key SlotKey, next Recall) {
	m.mu.Lock()
	defer m.mu.Unlock()
	slots := m.ByLease[key.Lease]
	for k, g := range next {
		if was, ok := slots[key.Slot][k]; ok && was.ObservedAt.After(g.ObservedAt) {
			g.Renewal = was.Renewal
			next[k] = g
		}
	}
	if len(next) == 0 {
		delete(slots, key.Slot)
		if len(slots) == 0 {
			delete(m.ByLease, key.Lease)
		}
		return
	}
	if slots == nil {
		slots = map[int32]Recall{}
		m.ByLease[key.Lease] = slots
	}
	slots[key.Slot] = next
}

// RenewedOnEvent records RenewTime, which a Lease event brought, as a renewal of grant
// (uid, token) seen now, and is true, when that grant is settled: nothing but its expiry
// is waiting, and the pass its expiry timer brings judges it on this observation. False,
// recording nothing, for any other grant: the event then queues a pass, which observes.
func (m *GrantMemory) RenewedOnEvent(key SlotKey, uid types.UID, token int64, renewTime *metav1.MicroTime) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.ByLease[key.Lease][key.Slot][grantKey{uid, token}]
	if !ok || !g.Settled || g.Revoking.Reason != "" || !g.HandoffSince.IsZero() || renewTime == nil || g.ObservedAt.IsZero() {
		return false
	}
	if !renewTime.Equal(g.RenewTime) {
		g.Renewal = g.Observe(renewTime, m.clock.Now())
		m.ByLease[key.Lease][key.Slot][grantKey{uid, token}] = g
	}
	return true
}

// Forget drops what is known of a FencedLease that is gone.
func (m *GrantMemory) Forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.ByLease, key)
	delete(m.due, key)
}
