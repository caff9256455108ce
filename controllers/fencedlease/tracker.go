package fencedlease

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// renewalTracker remembers, per FencedLease, when this process last saw the holder's
// renewal change. Times come from the injected clock, so they carry a monotonic reading
// and wall-clock steps do not move a deadline.
type renewalTracker struct {
	clock clock.PassiveClock

	mu   sync.Mutex
	seen map[types.NamespacedName]renewal
	// delays remembers, per FencedLease, when this process began the lock-delay of its
	// last revocation.
	delays map[types.NamespacedName]delayStart
	// onLease remembers, per FencedLease, the grant this process last wrote on an idle
	// FencedLease's Lease ahead of the status (G2), and when.
	onLease map[types.NamespacedName]delayStart
}

// delayStart is when the lock-delay after revocation (uid, token) began on this clock.
type delayStart struct {
	uid   types.UID
	token int64
	since time.Time
}

type renewal struct {
	uid   types.UID
	token int64
	// renewTime is the Lease's renewTime as the holder wrote it: compared for change
	// only, never against this process's clock.
	renewTime  *metav1.MicroTime
	observedAt time.Time
	// seenRenewing: observedAt is a renewal this process saw happen, not its first look
	// at the grant.
	seenRenewing bool
	// settled: the last pass kept the grant with nothing of it waiting for a renewal, so
	// a renewal is observed as its Lease event arrives and queues no pass (renewals.go).
	settled bool
	// handoffSince is when this process first saw the grant asked to hand off; zero before.
	handoffSince time.Time
	// revoking is the revocation this process decided and began on the Lease (X3) for
	// the grant, until the status records it (X4); zero before.
	revoking pendingRevocation
	// newer is the last answer to "which waiting pod is of a newer revision of the
	// holder's workload", for the candidates it was asked about: asked again only when
	// they change, and still known when the holder pod is gone.
	newer newerRevisionAnswer
}

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
}

func newRenewalTracker(c clock.PassiveClock) *renewalTracker {
	return &renewalTracker{clock: c, seen: map[types.NamespacedName]renewal{}, delays: map[types.NamespacedName]delayStart{},
		onLease: map[types.NamespacedName]delayStart{}}
}

// observe returns when this process last saw a renewal of grant (uid, token). A
// renewTime different from the last one seen counts as a renewal now; the first look
// at a grant counts as one too, which gives every holder a full duration after a restart.
// A nil renewTime means the Lease does not currently show the grant: that is never a
// renewal, but it still starts the clock for a grant seen for the first time.
func (t *renewalTracker) observe(key types.NamespacedName, uid types.UID, token int64, renewTime *metav1.MicroTime) renewal {
	t.mu.Lock()
	defer t.mu.Unlock()
	last, ok := t.seen[key]
	sameGrant := ok && last.uid == uid && last.token == token
	switch {
	case !sameGrant:
		last = renewal{uid: uid, token: token, renewTime: renewTime, observedAt: t.clock.Now()}
	case renewTime != nil && !renewTime.Equal(last.renewTime):
		last.renewTime = renewTime
		last.observedAt = t.clock.Now()
		last.seenRenewing = true
	default:
		return last
	}
	t.seen[key] = last
	return last
}

// settle records that the pass which just ended kept grant (uid, token) settled.
func (t *renewalTracker) settle(key types.NamespacedName, uid types.UID, token int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if last, ok := t.seen[key]; ok && last.uid == uid && last.token == token {
		last.settled = true
		t.seen[key] = last
	}
}

// unsettle: a pass decided something other than keeping a settled grant; from now on
// every renewal queues a pass, as any event does, until a pass settles the grant again.
func (t *renewalTracker) unsettle(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if last, ok := t.seen[key]; ok && last.settled {
		last.settled = false
		t.seen[key] = last
	}
}

// renewedOnEvent records renewTime, which a Lease event brought, as a renewal of grant
// (uid, token) seen now, and is true, when that grant is settled: nothing but its expiry
// is waiting, and the pass its expiry timer brings judges it on this observation. False,
// recording nothing, for any other grant: the event then queues a pass, which observes.
func (t *renewalTracker) renewedOnEvent(key types.NamespacedName, uid types.UID, token int64, renewTime *metav1.MicroTime) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	last, ok := t.seen[key]
	if !ok || last.uid != uid || last.token != token || !last.settled ||
		last.revoking.reason != "" || !last.handoffSince.IsZero() || renewTime == nil {
		return false
	}
	if !renewTime.Equal(last.renewTime) {
		last.renewTime = renewTime
		last.observedAt = t.clock.Now()
		last.seenRenewing = true
		t.seen[key] = last
	}
	return true
}

// handoffStarted returns when this process asked grant (uid, token) to hand off, or
// first saw it asked: the hand-off grace period counts from there on this process's
// clock, so after a restart a holder gets the whole grace period again. Call it after
// observe.
func (t *renewalTracker) handoffStarted(key types.NamespacedName, uid types.UID, token int64) time.Time {
	return t.handoffAsked(key, uid, token, t.clock.Now())
}

// handoffAsked records that grant (uid, token) was asked to hand off at at (a reading of
// this process's clock), unless it already was, and returns when it was.
func (t *renewalTracker) handoffAsked(key types.NamespacedName, uid types.UID, token int64, at time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	last, ok := t.seen[key]
	if !ok || last.uid != uid || last.token != token {
		return at
	}
	if last.handoffSince.IsZero() {
		last.handoffSince = at
		t.seen[key] = last
	}
	return last.handoffSince
}

// handoffWithdrawn forgets when grant (uid, token) was asked to hand off: the request was
// withdrawn, and a later one counts its grace period from its own start.
func (t *renewalTracker) handoffWithdrawn(key types.NamespacedName, uid types.UID, token int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if last, ok := t.seen[key]; ok && last.uid == uid && last.token == token {
		last.handoffSince = time.Time{}
		t.seen[key] = last
	}
}

// revokingOnLease records that this process cleared the Lease to revoke grant (uid,
// token) for reason (X3), so the revocation is finished with that reason and lateness
// whatever the next look at the clock says.
func (t *renewalTracker) revokingOnLease(key types.NamespacedName, uid types.UID, token int64, p pendingRevocation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if last, ok := t.seen[key]; ok && last.uid == uid && last.token == token {
		last.revoking = p
		t.seen[key] = last
	}
}

// newerRevision returns the remembered newer-revision answer for grant (uid, token).
func (t *renewalTracker) newerRevision(key types.NamespacedName, uid types.UID, token int64) (newerRevisionAnswer, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	last, ok := t.seen[key]
	if !ok || last.uid != uid || last.token != token || last.newer.candidates == "" {
		return newerRevisionAnswer{}, false
	}
	return last.newer, true
}

// rememberNewerRevision records a newer-revision answer for grant (uid, token).
func (t *renewalTracker) rememberNewerRevision(key types.NamespacedName, uid types.UID, token int64, a newerRevisionAnswer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if last, ok := t.seen[key]; ok && last.uid == uid && last.token == token {
		last.newer = a
		t.seen[key] = last
	}
}

// delayStarted records that the lock-delay after revocation (uid, token) began at at (a
// reading of this clock: when this process revoked, or first saw the revocation), unless
// it already had, and returns when it began.
func (t *renewalTracker) delayStarted(key types.NamespacedName, uid types.UID, token int64, at time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d, ok := t.delays[key]; ok && d.uid == uid && d.token == token {
		return d.since
	}
	t.delays[key] = delayStart{uid: uid, token: token, since: at}
	return at
}

// grantedOnLease records that this process wrote grant (uid, token) on the Lease at at,
// before the status records it (G2 on an idle FencedLease).
func (t *renewalTracker) grantedOnLease(key types.NamespacedName, uid types.UID, token int64, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.onLease[key] = delayStart{uid: uid, token: token, since: at}
}

// grantedOnLeaseAt is when this process wrote grant (uid, token) on the Lease; zero when
// it did not (another process did, or this one restarted since).
func (t *renewalTracker) grantedOnLeaseAt(key types.NamespacedName, uid types.UID, token int64) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if g, ok := t.onLease[key]; ok && g.uid == uid && g.token == token {
		return g.since
	}
	return time.Time{}
}

// forget drops what is known of a FencedLease that is gone.
func (t *renewalTracker) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.seen, key)
	delete(t.delays, key)
	delete(t.onLease, key)
}
