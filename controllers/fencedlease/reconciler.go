package fencedlease

import (
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/controllers/leadership"
)

// Reconciler grants, watches and revokes FencedLeases.
type Reconciler struct {
	client.Client
	// apiReader reads the Lease uncached, so expiry is never judged on a stale copy.
	apiReader client.Reader
	recorder  recorder.EventRecorder
	clock     clock.PassiveClock
	metrics   *Metrics
	// maxConcurrentReconciles is how many FencedLeases are reconciled at once (one key is
	// never reconciled twice at once).
	maxConcurrentReconciles int

	candidacy *leadership.Candidacy
	memory    *Memory
	pods      podLister
	nodes     nodeJudge // nil: every node can take a grant
	grants    *decision.GrantMemory
	recovery  *recovery
	ownWrites *ownWrites
	uncached  *uncachedLeases
	// staleRetries spaces the retries after stale reads (staleretry.go); nil: every one
	// in ConflictRetry.
	staleRetries workqueue.TypedRateLimiter[ctrl.Request]
}
