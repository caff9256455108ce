package fencedlease

import (
	"errors"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/controllers/leadership"
)

// DefaultConcurrency is the operator's --max-concurrent-reconciles default: enough
// reconciles in flight to keep the API server busy through a mass failover, few enough
// that holders' renewals still get through it. At 64, 1,000 failovers at once took so
// much of the benchmark's server that renewals outran their deadline, and every lost
// holder was one more failover; at 16 fewer were lost on average, and new grants went
// faster (docs/notes/performance-history.md, "Sixteen reconciles at once").
const DefaultConcurrency = 16

// Options are what the controller is built from. Setup refuses a missing one.
type Options struct {
	// Guard fences every write to the time this replica's leadership is certain
	// (controllers/leadership): required unless Unelected or Candidacy.
	Guard *leadership.Guard
	// Candidacy, instead of Guard, makes the manager one candidacy of a
	// leadership.Campaign: writes go through its Term, the controller's runnables are
	// waited for before the next candidacy starts, and an outage a reconcile or the pod
	// informer sees is the campaign's to probe (it replaces the manager when the API server
	// answers again).
	Candidacy *leadership.Candidacy
	// Memory, when set, is what the controller remembers of holders, kept across the
	// candidacies of one process (NewMemory, on Clock); unset, it starts empty — every
	// holder gets a whole lease from the first look.
	Memory *Memory
	// Unelected says that no leader is elected (one replica, the demo), so writes go
	// unguarded. It must be said: a missing Guard is otherwise an error.
	Unelected bool
	// Clock judges expiry; clock.RealClock{} but in unit tests.
	Clock clock.PassiveClock
	// Metrics, from NewMetrics.
	Metrics *Metrics
	// MaxConcurrentReconciles is how many FencedLeases are reconciled at once (one key is
	// never reconciled twice at once); at least 1.
	MaxConcurrentReconciles int
}

// Setup builds the FencedLease controller on mgr the one way the operator binary, the
// demo and the tests all run it: writes through the leadership guard when the manager
// elects a leader, the uncached reader for what must not be judged on a stale copy, the
// manager's event recorder.
func Setup(mgr ctrl.Manager, o Options) (*Reconciler, error) {
	writer := mgr.GetClient()
	switch {
	case (o.Guard != nil) && o.Unelected, (o.Candidacy != nil) && o.Unelected, (o.Guard != nil) && (o.Candidacy != nil):
		return nil, errors.New("fencedlease: a leadership Guard, a Candidacy and Unelected exclude each other")
	case o.Guard != nil:
		writer = o.Guard.Client(writer)
	case o.Candidacy != nil:
		writer = o.Candidacy.Term.Client(writer)
		mgr = o.Candidacy.Manager(mgr)
	case !o.Unelected:
		return nil, errors.New("fencedlease: a leadership Guard or Candidacy is required where a leader is elected (set Unelected for a single replica)")
	}
	r := &Reconciler{
		candidacy:               o.Candidacy,
		memory:                  o.Memory,
		Client:                  writer,
		apiReader:               mgr.GetAPIReader(),
		recorder:                mgr.GetEventRecorder("fencedlease-controller"),
		clock:                   o.Clock,
		metrics:                 o.Metrics,
		maxConcurrentReconciles: o.MaxConcurrentReconciles,
	}
	return r, r.SetupWithManager(mgr)
}

// SetupWithManager watches FencedLeases, their Leases and their labeled pods. It
// refuses a Reconciler that lacks a dependency instead of defaulting it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := r.lacking(); err != nil {
		return err
	}
	pods, err := r.addCaches(mgr)
	if err != nil {
		return err
	}
	if r.memory != nil {
		r.grants = r.memory.grants
	} else {
		r.grants = decision.NewGrantMemory(r.clock)
	}
	r.ownWrites = newOwnWrites(r.clock)
	r.uncached = newUncachedLeases()
	r.staleRetries = newStaleRetries()
	r.recovery = newRecovery(r.apiReader, r.Client)
	r.recovery.candidacy = r.candidacy
	if r.candidacy == nil {
		if err := mgr.Add(r.recovery); err != nil {
			return err
		}
	}
	// The echoes of its own writes come back at followUpPriority (priority.go).
	echoes := func(h handler.EventHandler) handler.EventHandler { return echoesFollowUp{h, r.ownWrites} }
	return ctrl.NewControllerManagedBy(mgr).
		// Its own status writes need no second look: the reconcile that wrote them goes on
		// to the Lease and the pods. Watched rather than For, which has no say in the
		// priority of its events.
		Watches(&fencingv1.FencedLease{}, echoes(&handler.EnqueueRequestForObject{}), builder.WithPredicates(r.notStatusOnly())).
		// A settled grant's renewal is observed as it arrives and queues nothing (renewals.go).
		Watches(&coordinationv1.Lease{}, observeRenewals{echoes(handler.EnqueueRequestsFromMapFunc(byLabel)), r.grants}).
		WatchesRawSource(pods.source(echoes(handler.EnqueueRequestsFromMapFunc(byLabel)))).
		WatchesRawSource(source.Channel(r.recovery.events, &handler.EnqueueRequestForObject{})).
		Named("fencedlease").
		WithOptions(controller.Options{
			MaxConcurrentReconciles: r.maxConcurrentReconciles,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](10*time.Millisecond, maxRetryDelay),
			UsePriorityQueue:        ptr.To(true),
			LogConstructor:          reconcileLogger(mgr.GetLogger()),
		}).
		Complete(r)
}

// lacking says which dependency the Reconciler was built without: it refuses one instead
// of defaulting it.
func (r *Reconciler) lacking() error {
	switch {
	case r.Client == nil:
		return errors.New("fencedlease: the Reconciler needs a Client (the manager's, through the leadership guard)")
	case r.apiReader == nil:
		return errors.New("fencedlease: the Reconciler needs an APIReader (the manager's uncached reader)")
	case r.recorder == nil:
		return errors.New("fencedlease: the Reconciler needs a Recorder")
	case r.clock == nil:
		return errors.New("fencedlease: the Reconciler needs a Clock")
	case r.metrics == nil:
		return errors.New("fencedlease: the Reconciler needs Metrics (NewMetrics)")
	case r.maxConcurrentReconciles < 1:
		return errors.New("fencedlease: MaxConcurrentReconciles must be at least 1")
	}
	return nil
}

// addCaches starts the pod and node caches with the manager; the pod cache is also a
// source of events.
func (r *Reconciler) addCaches(mgr ctrl.Manager) (*podCache, error) {
	pods, err := newPodCache(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, err
	}
	if r.candidacy != nil {
		if err := pods.informer.SetWatchErrorHandlerWithContext(r.candidacy.WatchError); err != nil {
			return nil, err
		}
	}
	if err := mgr.Add(pods); err != nil {
		return nil, err
	}
	r.pods = pods
	nodes, err := newNodeCache(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(nodes); err != nil {
		return nil, err
	}
	r.nodes = nodes
	return pods, nil
}

// reconcileLogger names the controller and the FencedLease in every reconcile's log, as
// the builder does for a controller built with For.
func reconcileLogger(base logr.Logger) func(*reconcile.Request) logr.Logger {
	log := base.WithValues("controller", "fencedlease", "controllerGroup", fencingv1.GroupVersion.Group, "controllerKind", "FencedLease")
	return func(req *reconcile.Request) logr.Logger {
		if req == nil {
			return log
		}
		return log.WithValues("FencedLease", klog.KRef(req.Namespace, req.Name), "namespace", req.Namespace, "name", req.Name)
	}
}
