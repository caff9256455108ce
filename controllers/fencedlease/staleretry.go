package fencedlease

import (
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
)

// newStaleRetries backs off the retries after stale reads (a Conflict, NotFound or
// AlreadyExists), per FencedLease: the first in conflictRetry — the newer object is
// usually on its way to the cache — each next one twice as late, up to maxRetryDelay. A
// write that keeps failing (an object gone for good) costs a pass a second, not fifty;
// any other outcome of a pass starts over.
func newStaleRetries() workqueue.TypedRateLimiter[ctrl.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[ctrl.Request](conflictRetry, maxRetryDelay)
}
