package fencedlease

import (
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// ownWrites remembers, for a minute, which version of each object (FencedLease, Lease,
// pod) the controller last wrote over. A reconcile that still reads that version from the
// cache (the watch has not delivered the write yet) would decide on a view older than its
// own last write, and its writes would fail on the optimistic lock — a request and a
// retry each, which under a mass failover happen to many objects at once. It waits for
// the cache instead.
type ownWrites struct {
	clock clock.PassiveClock

	mu        sync.Mutex
	from      map[types.UID]patched
	lastPrune time.Time
}

// patched are the versions of one object written over, newest last: one reconcile may
// write an object twice (a finalizer, then the status), and a reconcile reading the
// older of the two must see that it is behind too.
type patched struct {
	resourceVersions []string
	at               time.Time
}

// versionsKept is enough for every write one reconcile makes to one object.
const versionsKept = 4

// ownWriteMemory is far longer than a watch lags, and short enough to keep the map small.
const ownWriteMemory = time.Minute

func newOwnWrites(c clock.PassiveClock) *ownWrites {
	return &ownWrites{clock: c, from: map[types.UID]patched{}}
}

// landed is true when the controller already wrote over version resourceVersion of
// object uid. A nil ownWrites remembers nothing.
func (o *ownWrites) landed(uid types.UID, resourceVersion string) bool {
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

// after records what a write over version resourceVersion of object uid showed: written
// over if it succeeded, and superseded just the same if it was refused on that version
// (someone else wrote since — under load, a holder's renewal the cache has not shown
// yet). Either way a reconcile that still reads that version waits for the watch to
// bring the newer one, instead of sending writes bound to fail on it again.
func (o *ownWrites) after(uid types.UID, resourceVersion string, err error) {
	if err == nil || apierrors.IsConflict(err) {
		o.wrote(uid, resourceVersion)
	}
}

// wrote records a write over version resourceVersion of object uid.
func (o *ownWrites) wrote(uid types.UID, resourceVersion string) {
	if o == nil || resourceVersion == "" {
		return
	}
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	rvs := append(o.from[uid].resourceVersions, resourceVersion)
	if len(rvs) > versionsKept {
		rvs = rvs[len(rvs)-versionsKept:]
	}
	o.from[uid] = patched{resourceVersions: rvs, at: now}
	if now.Sub(o.lastPrune) < ownWriteMemory {
		return
	}
	o.lastPrune = now
	for uid, p := range o.from {
		if now.Sub(p.at) >= ownWriteMemory {
			delete(o.from, uid)
		}
	}
}

// behind is true when the world was read from a cache that does not show yet one of this
// controller's own writes.
func (o *ownWrites) behind(w world) bool {
	if o.landed(w.fl.UID, w.fl.ResourceVersion) {
		return true
	}
	if w.lease != nil && o.landed(w.lease.UID, w.lease.ResourceVersion) {
		return true
	}
	for i := range w.pods {
		if o.landed(w.pods[i].UID, w.pods[i].ResourceVersion) {
			return true
		}
	}
	return false
}
