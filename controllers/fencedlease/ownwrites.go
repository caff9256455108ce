package fencedlease

import (
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// ownWrites remembers, for a minute, which version of each object (FencedLease, Lease,
// pod) the controller last wrote over. A reconcile that still reads that version from the
// cache (the watch has not delivered the write yet) would decide on a view older than its
// own last write, and its writes would fail on the optimistic lock — a request and a
// retry each, which under a mass failover happen to many objects at once. It waits for
// the cache instead. It also knows the version each of its writes produced, so the watch
// event that only brings that version back is told from news (echo).
type ownWrites struct {
	clock clock.PassiveClock

	mu   sync.Mutex
	from map[types.UID]patched
	// leaseCreated: the slots' Leases this controller created, until a reconcile reads
	// that Lease from the cache.
	leaseCreated map[decision.SlotLease]time.Time
	lastPrune    time.Time
}

// patched are the versions of one object written over, newest last: one reconcile may
// write an object twice (a finalizer, then the status), and a reconcile reading the
// older of the two must see that it is behind too. made is the version the last
// successful write produced.
type patched struct {
	resourceVersions []string
	made             string
	at               time.Time
}

// versionsKept is enough for every write one reconcile makes to one object.
const versionsKept = 4

// ownWriteMemory is far longer than a watch lags, and short enough to keep the map small.
const ownWriteMemory = time.Minute

func newOwnWrites(c clock.PassiveClock) *ownWrites {
	return &ownWrites{clock: c, from: map[types.UID]patched{}, leaseCreated: map[decision.SlotLease]time.Time{}}
}

// wroteOver is true when the controller already wrote over version resourceVersion of
// object uid. A nil ownWrites remembers nothing.
func (o *ownWrites) wroteOver(uid types.UID, resourceVersion string) bool {
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if resourceVersion == "" {
		return false
	}
	return slices.Contains(o.from[uid].resourceVersions, resourceVersion)
}

// after records what write (the object as the write left it) over version from showed:
// written over if it succeeded, and superseded just the same if it was refused on that
// version (someone else wrote since — under load, a holder's renewal the cache has not
// shown yet). Either way a reconcile that still reads that version waits for the watch
// to bring the newer one, instead of sending writes bound to fail on it again. A
// success also records the version it made.
// A write the API server took as a no-op (the object as written serializes as it was, so
// its version stays from) is no write over anything: no newer version is coming.
func (o *ownWrites) after(written client.Object, from string, err error) {
	if err == nil && written.GetResourceVersion() == from {
		return
	}
	if err == nil || apierrors.IsConflict(err) {
		o.wrote(written.GetUID(), from)
	}
	if err == nil {
		o.made(written.GetUID(), written.GetResourceVersion())
	}
}

// wrote records a write over version resourceVersion of object uid.
func (o *ownWrites) wrote(uid types.UID, resourceVersion string) {
	if o == nil || resourceVersion == "" {
		return
	}
	o.update(uid, func(p *patched) {
		p.resourceVersions = append(p.resourceVersions, resourceVersion)
		if len(p.resourceVersions) > versionsKept {
			p.resourceVersions = p.resourceVersions[len(p.resourceVersions)-versionsKept:]
		}
	})
}

// made records that a write of this controller produced version resourceVersion of
// object uid.
func (o *ownWrites) made(uid types.UID, resourceVersion string) {
	if o == nil || resourceVersion == "" {
		return
	}
	o.update(uid, func(p *patched) { p.made = resourceVersion })
}

// createdLease records the Lease this controller created for a slot: until the cache
// shows a Lease there, a reconcile of the slot is behind its own write (it would
// otherwise create it again, and be refused).
func (o *ownWrites) createdLease(owner decision.SlotLease, lease client.Object) {
	if o == nil {
		return
	}
	o.made(lease.GetUID(), lease.GetResourceVersion())
	o.mu.Lock()
	defer o.mu.Unlock()
	o.leaseCreated[owner] = o.clock.Now()
}

// echo is true when obj is exactly the version one of this controller's own writes
// produced: its watch event brings nothing the controller does not know already.
func (o *ownWrites) echo(obj client.Object) bool {
	if o == nil || obj.GetResourceVersion() == "" {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.from[obj.GetUID()].made == obj.GetResourceVersion()
}

// update changes what is remembered of object uid, and forgets what is a minute old.
func (o *ownWrites) update(uid types.UID, change func(*patched)) {
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.from[uid]
	change(&p)
	p.at = now
	o.from[uid] = p
	if now.Sub(o.lastPrune) < ownWriteMemory {
		return
	}
	o.lastPrune = now
	for uid, p := range o.from {
		if now.Sub(p.at) >= ownWriteMemory {
			delete(o.from, uid)
		}
	}
	for owner, at := range o.leaseCreated {
		if now.Sub(at) >= ownWriteMemory {
			delete(o.leaseCreated, owner)
		}
	}
}

// leaseNotShown is true while the cache does not show (shown) the Lease this controller
// created for a slot; once it does, that is forgotten.
func (o *ownWrites) leaseNotShown(owner decision.SlotLease, shown bool) bool {
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, created := o.leaseCreated[owner]; !created {
		return false
	}
	if shown {
		delete(o.leaseCreated, owner)
		return false
	}
	return true
}

// behind is true when fl, its Lease (nil: none; created for LeaseOwner) and its pods were
// read from a cache that does not show yet one of this controller's own writes.
func (o *ownWrites) behind(fl *fencingv1.FencedLease, leaseOwner decision.SlotLease, lease *coordinationv1.Lease, pods []*corev1.Pod) bool {
	if o.wroteOver(fl.UID, fl.ResourceVersion) {
		return true
	}
	if o.leaseNotShown(leaseOwner, lease != nil) {
		return true
	}
	if lease != nil && o.wroteOver(lease.UID, lease.ResourceVersion) {
		return true
	}
	for _, p := range pods {
		if o.wroteOver(p.UID, p.ResourceVersion) {
			return true
		}
	}
	return false
}
