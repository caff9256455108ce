package fencedlease

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// uncachedLeases remembers the FencedLeases whose Lease the API server has and the cache
// may never show: the cache holds labeled Leases only, so a Lease someone else created
// under the FencedLease's name (A3) is known from a refused creation or an uncached read.
// Until that Lease is read gone, every observation reads it from the API server.
type uncachedLeases struct {
	mu     sync.Mutex
	exists map[types.NamespacedName]bool
}

func newUncachedLeases() *uncachedLeases {
	return &uncachedLeases{exists: map[types.NamespacedName]bool{}}
}

// found records that the API server has key's Lease (exists) or not (!exists).
func (u *uncachedLeases) found(key types.NamespacedName, exists bool) {
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if exists {
		u.exists[key] = true
	} else {
		delete(u.exists, key)
	}
}

// has is true when key's Lease was last seen on the API server and not in the cache.
func (u *uncachedLeases) has(key types.NamespacedName) bool {
	if u == nil {
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.exists[key]
}
