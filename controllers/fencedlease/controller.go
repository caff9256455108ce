package fencedlease

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/controllers/leadership"
)

// +kubebuilder:rbac:groups=fencing.fencedlease.io,resources=fencedleases,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fencing.fencedlease.io,resources=fencedleases/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fencing.fencedlease.io,resources=fencedleases/finalizers,verbs=update
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=replicasets;statefulsets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile observes, decides the next status, writes it once, then makes the Lease and
// the pods follow it. A write that lost an optimistic-concurrency race, hit an object
// the cache did not yet know was gone, or created one that already existed, is retried
// from a fresh observation; that is routine, not an error to report.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// No request may hang: a reconcile stuck on a dead connection holds its FencedLease.
	ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
	defer cancel()
	res, err := r.reconcile(ctx, req)
	r.recovery.observe(err)
	if r.staleRetries != nil && !staleRead(err) {
		r.staleRetries.Forget(req)
	}
	switch {
	case staleRead(err):
		retry := decision.ConflictRetry
		if r.staleRetries != nil {
			retry = r.staleRetries.When(req)
		}
		logf.FromContext(ctx).V(1).Info("stale read, retrying", "error", err.Error(), "after", retry)
		return ctrl.Result{RequeueAfter: retry}, nil
	case errors.Is(err, leadership.ErrNotLeader) || errors.Is(err, leadership.ErrTermEnded):
		// Not certainly the leader: decide nothing. Leadership comes back with the next
		// confirmed renewal, or the process ends and a standby takes over.
		logf.FromContext(ctx).Info("leadership not certain; not acting")
		return ctrl.Result{RequeueAfter: notLeaderRetry}, nil
	}
	return res, err
}

// staleRead: a write lost an optimistic-concurrency race, hit an object the cache did not
// yet know was gone, or created one that already existed.
func staleRead(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err)
}

const (
	// notLeaderRetry: a leader that missed a renewal usually confirms the next one soon.
	notLeaderRetry = time.Second
	// reconcileTimeout bounds one reconcile's requests together.
	reconcileTimeout = 10 * time.Second
	// maxRetryDelay caps the workqueue's back-off after errors: after an API-server
	// outage every failed FencedLease is tried again within this, not minutes later.
	maxRetryDelay = time.Second
)

// reconcile is one pass: get the FencedLease, pass its gates, finish its pods' admission
// (let its Warm candidates run), observe, decide, run the plan, remember. Nothing after decide decides again; what
// the pass remembers it writes in one place, from what it observed and what of its plan
// landed.
func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fl, wait, err := r.admit(ctx, req)
	if fl == nil || err != nil {
		return wait, err
	}
	if wrote, err := r.finishAdmission(ctx, fl); err != nil {
		return ctrl.Result{}, err
	} else if wrote {
		return ctrl.Result{RequeueAfter: decision.CacheBehind}, nil
	}
	return r.pass(ctx, fl)
}

// admit gets the FencedLease and passes it through the gates before a pass: gone (its
// memory is dropped, its waiting pods told so), the cache still behind this controller's
// last write to it, the finalizer added first, deleted with nothing left to do. fl is nil
// when the pass ends here, with result.
func (r *Reconciler) admit(ctx context.Context, req ctrl.Request) (_ *fencingv1.FencedLease, result ctrl.Result, _ error) {
	fl := &fencingv1.FencedLease{}
	if err := r.Get(ctx, req.NamespacedName, fl); err != nil {
		if apierrors.IsNotFound(err) {
			r.grants.Forget(req.NamespacedName)
			r.uncached.found(req.NamespacedName, false)
			r.metrics.forget(req.NamespacedName)
			retry, err := r.reportMissing(ctx, req.NamespacedName)
			return nil, ctrl.Result{RequeueAfter: retry}, err
		}
		return nil, ctrl.Result{}, err
	}
	if r.ownWrites.wroteOver(fl.UID, fl.ResourceVersion) {
		return nil, ctrl.Result{RequeueAfter: decision.CacheBehind}, nil
	}
	if fl.DeletionTimestamp == nil && controllerutil.AddFinalizer(fl, fencingv1.Finalizer) {
		from := fl.ResourceVersion
		err := r.Update(ctx, fl)
		r.ownWrites.after(fl, from, err)
		if err != nil {
			return nil, ctrl.Result{}, err
		}
	}
	if fl.DeletionTimestamp != nil && !controllerutil.ContainsFinalizer(fl, fencingv1.Finalizer) {
		return nil, ctrl.Result{}, nil
	}
	return fl, ctrl.Result{}, nil
}

// notStatusOnly lets every event through but an update that changed only the status —
// which only this controller writes (the fencedlease-status admission policy) — unless a
// reconcile waits for it: one that found the cache behind this very write.
func (r *Reconciler) notStatusOnly() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetGeneration() != n.GetGeneration() ||
			!equality.Semantic.DeepEqual(o.GetDeletionTimestamp(), n.GetDeletionTimestamp()) ||
			!equality.Semantic.DeepEqual(o.GetFinalizers(), n.GetFinalizers()) ||
			!equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) ||
			!equality.Semantic.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) ||
			r.ownWrites.wroteOver(o.GetUID(), o.GetResourceVersion())
	}}
}

// byLabel maps a labeled Lease or pod to the FencedLease its label names.
func byLabel(_ context.Context, o client.Object) []reconcile.Request {
	name, ok := o.GetLabels()[fencingv1.LeaseLabel]
	if !ok || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}
