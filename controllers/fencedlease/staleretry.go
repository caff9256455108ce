package fencedlease

import (
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// newStaleRetries spaces the retries after stale reads (a Conflict, NotFound or
// AlreadyExists), per FencedLease: the first fastStaleRetries in ConflictRetry — the newer
// object is usually on its way to the cache, and a burst of them under load must not
// delay an expiry — then one each maxRetryDelay. A write that keeps failing (an object
// gone for good) costs a pass a second, not fifty; any other outcome of a pass starts over.
func newStaleRetries() workqueue.TypedRateLimiter[ctrl.Request] {
	return workqueue.NewTypedItemFastSlowRateLimiter[ctrl.Request](decision.ConflictRetry, maxRetryDelay, fastStaleRetries)
}

// fastStaleRetries is how many retries in a row come in ConflictRetry (0.2 s in all).
const fastStaleRetries = 10
