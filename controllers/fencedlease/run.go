package fencedlease

import (
	"context"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// run carries out the plan of decision d, taken on world w, step by step, and stops at
// the first write that fails; it says what landed. The FencedLease it writes is a copy
// of the one observed, carrying the decided status: the Lease and the pods follow that
// status whether it is written now or waits (deferStatus).
func (r *Reconciler) run(ctx context.Context, w world, d decision) (landed, error) {
	var done landed
	fl := w.fl.DeepCopy()
	fl.Status = d.status
	lease := w.lease
	pods := slices.Concat(w.pods, w.unlabeled)
	for _, s := range d.plan.steps {
		var err error
		switch s.kind {
		case cutLease:
			if lease, err = r.revokeOnLease(ctx, fl, w.slot, d, lease); err != nil {
				err = fmt.Errorf("revoking on the Lease: %w", err)
			}
			done.leaseCut = err == nil
		case tellCutOff:
			r.tellCutOff(fl, w.fl.Status.Holder, d)
		case writeStatus:
			if w.slot.sharded {
				err = r.writeSlotStatus(ctx, fl, w.slot, d)
			} else {
				err = r.writeStatus(ctx, fl, !equality.Semantic.DeepEqual(w.fl.Status, d.status), d)
			}
			done.status = err == nil
		case writeLease:
			if err = r.syncLease(ctx, fl, w.slot, lease, w.held.renewal); err != nil {
				err = fmt.Errorf("writing Lease: %w", err)
			}
			done.lease = err == nil
		case demoteEnded:
			if p := findPod(pods, d.end.holder.PodUID); p != nil {
				err = r.demote(ctx, fl, p)
			}
		case demotePods:
			err = r.demotePods(ctx, fl, pods)
		case promoteHolder:
			err = r.promoteHolder(ctx, fl, w.slot, pods)
		case deleteRevoked:
			err = r.deleteRevokedPods(ctx, fl, pods)
		case releaseFinalizer:
			controllerutil.RemoveFinalizer(fl, fencingv1.Finalizer)
			err = r.Update(ctx, fl)
		}
		if err != nil {
			return done, err
		}
	}
	done.all = true
	return done, nil
}

// revokeOnLease ends the status's grant on the Lease with a compare-and-swap on the
// version read, before the status records anything (X3, C1), so a renewal that landed
// since wins and the decision is made again. When the decision grants the next pod too,
// the same write names it (X3 with G2: the hand-over): its token is the status's next,
// and the Lease is its first record — a status write that fails after it is finished by
// the next reconcile, which adopts the grant off the Lease (adoptRule).
func (r *Reconciler) revokeOnLease(ctx context.Context, fl *fencingv1.FencedLease, s slotFrame, d decision, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if !d.leaseShowsHolder {
		return lease, nil // the grant never reached the Lease: nobody could renew it
	}
	next := lease.DeepCopy()
	if d.grant != nil {
		next = leaseShowing(fl, s, &d.status, lease, renewal{})
	} else {
		var reason fencingv1.RevocationReason
		switch t := d.end; {
		case t != nil && t.kind == cutOff && t.revocation == fencingv1.ReasonPodCannotRun:
			// Only the Lease can say why this holder stands cut off (see waitingOutCutOff).
			reason = t.revocation
		case t != nil && t.kind == revoke:
			// Revoked here and now (X3): a restart before the status records it (X4) still
			// finishes it for this reason (finishRevocationRule).
			reason = t.revocation
		}
		leaserecord.CutOff(next, reason)
	}
	err := r.Update(ctx, next)
	r.ownWrites.after(next, lease.ResourceVersion, err)
	if err != nil {
		return nil, err
	}
	return next, nil
}

// writeStatus writes fl's status, the decided one, with the resourceVersion that was
// read, when it changed: a token is spent only if nobody else wrote in between. Events
// and metrics follow a successful write only.
func (r *Reconciler) writeStatus(ctx context.Context, fl *fencingv1.FencedLease, changed bool, d decision) error {
	if !changed {
		return nil
	}
	from := fl.ResourceVersion
	err := r.Status().Update(ctx, fl)
	r.ownWrites.after(fl, from, err)
	if err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	r.emitEvents(ctx, fl, d, "")
	return nil
}

// tellCutOff tells the user of holder h cut off on request or because its pod cannot
// run (Q2, X9): its renewals are refused from now on, and it is revoked when the lease
// it last renewed has run out.
func (r *Reconciler) tellCutOff(fl *fencingv1.FencedLease, h *fencingv1.Holder, d decision) {
	pod, left := podRef(fl.Namespace, h.PodName, h.PodUID), d.requeueAfter.Round(time.Millisecond)
	if d.cutOffOnRequest() {
		r.event(fl, pod, true, corev1.EventTypeWarning, "RevokeRequested", "Revoke",
			fmt.Sprintf("revoking token %d of pod %s as requested (%s): its renewals are refused from now on, and the next pod is granted once its lease has run out, in at most %v",
				h.Token, h.PodName, fencingv1.RevokeAnnotation, left))
		return
	}
	r.event(fl, pod, true, corev1.EventTypeWarning, string(fencingv1.ReasonPodCannotRun), "Revoke",
		fmt.Sprintf("revoking token %d of pod %s: %s; its renewals are refused from now on, and the next pod is granted once its lease has run out, in at most %v",
			h.Token, h.PodName, d.end.message, left))
}
