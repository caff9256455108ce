package fencedlease

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// beginPass reads what the slots of fl share in a pass: the labeled pods, and every
// Lease the operator made for fl (NewSlotPass).
func (r *Reconciler) beginPass(ctx context.Context, fl *fencingv1.FencedLease) (*decision.SlotPass, error) {
	pods, err := r.pods.forLease(fl.Namespace, fl.Name)
	if err != nil {
		return nil, err
	}
	onLease, err := r.slotRecords(ctx, fl)
	if err != nil {
		return nil, err
	}
	p := decision.NewSlotPass(fl, pods, onLease)
	p.First, p.HasFirst = r.grants.Due(client.ObjectKeyFromObject(fl))
	return p, nil
}

// slotRecords reads fl's slots' Leases, by slot, from the cache (it holds the operator's
// labeled Leases: no request).
func (r *Reconciler) slotRecords(ctx context.Context, fl *fencingv1.FencedLease) (leaserecord.Slots, error) {
	leases := &coordinationv1.LeaseList{}
	if err := r.List(ctx, leases, client.InNamespace(fl.Namespace), client.MatchingLabels{fencingv1.LeaseLabel: fl.Name}); err != nil {
		return nil, err
	}
	return leaserecord.ReadSlots(leases.Items, fl.Name), nil
}

// resultOf is when the pass asks to run again, once plan p has run.
func resultOf(p decision.Plan) ctrl.Result {
	return ctrl.Result{RequeueAfter: p.RequeueAfter, Priority: priorityOf(p.Priority)}
}

// sooner is the result that runs again sooner: a requeue before none.
func sooner(a, b ctrl.Result) ctrl.Result {
	switch {
	case a.RequeueAfter <= 0:
		return b
	case b.RequeueAfter <= 0 || a.RequeueAfter <= b.RequeueAfter:
		return a
	}
	return b
}
