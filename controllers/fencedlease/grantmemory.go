package fencedlease

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

// renewal is when this process last saw grant (uid, token) renew.
type renewal struct {
	uid   types.UID
	token int64
	// renewTime is the Lease's renewTime as the holder wrote it: compared for change
	// only, never against this process's clock.
	renewTime *metav1.MicroTime
	// observedAt is when this process saw renewTime change, or first looked at the grant;
	// zero before its first look. It carries a monotonic reading, so wall-clock steps do
	// not move a deadline.
	observedAt time.Time
	// seenRenewing: observedAt is a renewal this process saw happen, not its first look.
	seenRenewing bool
}

// observe is r after a look, at at, at the renewTime the Lease shows for the grant (nil:
// the Lease does not show it). A renewTime different from the last one seen counts as a
// renewal at at; the first look counts as one too, which gives every holder a full
// duration after a restart. A nil renewTime is never a renewal, but it still starts the
// clock of a grant looked at for the first time.
func (r renewal) observe(renewTime *metav1.MicroTime, at time.Time) renewal {
	switch {
	case r.observedAt.IsZero():
		return renewal{uid: r.uid, token: r.token, renewTime: renewTime, observedAt: at}
	case renewTime != nil && !renewTime.Equal(r.renewTime):
		r.renewTime, r.observedAt, r.seenRenewing = renewTime, at, true
	}
	return r
}

// grantRecord is all this process remembers of one grant, on its own clock.
type grantRecord struct {
	renewal
	// settled: the last pass kept the grant with nothing of it waiting for a renewal, so
	// a renewal is observed as its Lease event arrives and queues no pass (renewals.go).
	settled bool
	// handoffSince is when this process asked the grant to hand off, or first saw it
	// asked; zero when it is not.
	handoffSince time.Time
	// revoking is the revocation this process decided and began on the Lease (X3), until
	// the status records it (X4); zero before.
	revoking pendingRevocation
	// newer is the last answer to "which waiting pod is of a newer revision of the
	// holder's workload", for the candidates it was asked about: asked again only when
	// they change, and still known when the holder pod is gone.
	newer newerRevisionAnswer
	// delaySince is when the lock-delay after this grant's revocation began (X8): when
	// this process revoked it, or first saw it revoked.
	delaySince time.Time
	// grantedOnLeaseAt is when this process wrote the grant on the Lease ahead of the
	// status (G2 on an idle FencedLease).
	grantedOnLeaseAt time.Time
}

func (g grantRecord) key() grantKey { return grantKey{g.uid, g.token} }

// newerRevisionAnswer is a remembered newerRevision lookup: successor (empty: none) for
// the candidates whose UIDs, in order, make up candidates.
type newerRevisionAnswer struct {
	candidates string
	successor  types.UID
}

// pendingRevocation is a revocation decided with its reason and lateness, kept so a
// reconcile that finishes it after a failed status write records what was decided.
type pendingRevocation struct {
	reason   fencingv1.RevocationReason
	message  string
	lateness time.Duration
	// at is when it was decided, on this clock: the revocation's time and the start of
	// its lock-delay, however much later the status records it.
	at time.Time
	// handedOverAt is when this process's compare-and-swap also named the next grant on
	// the Lease (the hand-over); zero when it only cleared it. The status write that
	// records both waits from here for the new holder's first renewal (statusCoalesce).
	handedOverAt time.Time
	// podsFollowed: that hand-over's pass also marked the pods (X5); a Warm successor's
	// pass writes the Lease alone (P1), and the old holder's pod is marked later.
	podsFollowed bool
}

// recall is what a pass knows of one FencedLease's grants: read once when it begins
// (a copy), and written back once when it ends (remember).
type recall map[grantKey]grantRecord

// of is the record of grant (uid, token): empty, with its key, when there is none.
func (c recall) of(uid types.UID, token int64) grantRecord {
	if g, ok := c[grantKey{uid, token}]; ok {
		return g
	}
	return grantRecord{renewal: renewal{uid: uid, token: token}}
}

// grantMemory holds, per FencedLease and slot, the records of the grants it still needs.
type grantMemory struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	byLease map[types.NamespacedName]map[int32]recall
}

func newGrantMemory(c clock.PassiveClock) *grantMemory {
	return &grantMemory{clock: c, byLease: map[types.NamespacedName]map[int32]recall{}}
}

// read is a copy of what is remembered of the grants of slot key.
func (m *grantMemory) read(key slotKey) recall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.byLease[key.lease][key.slot])
}

// write replaces what is remembered of slot key with next, a pass's outcome. A renewal
// that a Lease event recorded while the pass ran (renewedOnEvent) is newer than the
// pass's own look, and is kept.
func (m *grantMemory) write(key slotKey, next recall) {
	m.mu.Lock()
	defer m.mu.Unlock()
	slots := m.byLease[key.lease]
	for k, g := range next {
		if was, ok := slots[key.slot][k]; ok && was.observedAt.After(g.observedAt) {
			g.renewal = was.renewal
			next[k] = g
		}
	}
	if len(next) == 0 {
		delete(slots, key.slot)
		if len(slots) == 0 {
			delete(m.byLease, key.lease)
		}
		return
	}
	if slots == nil {
		slots = map[int32]recall{}
		m.byLease[key.lease] = slots
	}
	slots[key.slot] = next
}

// renewedOnEvent records renewTime, which a Lease event brought, as a renewal of grant
// (uid, token) seen now, and is true, when that grant is settled: nothing but its expiry
// is waiting, and the pass its expiry timer brings judges it on this observation. False,
// recording nothing, for any other grant: the event then queues a pass, which observes.
func (m *grantMemory) renewedOnEvent(key slotKey, uid types.UID, token int64, renewTime *metav1.MicroTime) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.byLease[key.lease][key.slot][grantKey{uid, token}]
	if !ok || !g.settled || g.revoking.reason != "" || !g.handoffSince.IsZero() || renewTime == nil || g.observedAt.IsZero() {
		return false
	}
	if !renewTime.Equal(g.renewTime) {
		g.renewal = g.observe(renewTime, m.clock.Now())
		m.byLease[key.lease][key.slot][grantKey{uid, token}] = g
	}
	return true
}

// forget drops what is known of a FencedLease that is gone.
func (m *grantMemory) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byLease, key)
}
