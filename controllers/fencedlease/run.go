package fencedlease

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// runSteps carries out the steps of slot sr's plan that come before the pass's status
// write (afterStatus false) or after it (true), and stops at the first write that fails.
// Before: ending the grant on the Lease and demoting its pod when the slot's status
// records its decision; every step when its status waits (deferStatus), so a grant made
// on its Lease is there before the status counts its token. After: the Lease and the
// pods. The status and the finalizer are the pass's (pass.go). The FencedLease it writes
// is the slot's view carrying the decided status.
func (r *Reconciler) runSteps(ctx context.Context, sr *slotRun, afterStatus bool) error {
	w, d, fl := sr.w, sr.d, sr.fl
	statusPlanned := d.plan.has(writeStatus)
	if t := sr.turn; t != nil && !afterStatus {
		defer t.tell(false) // not landed, unless told so below
		if !t.wait() {
			return errGrantBelowFailed
		}
	}
	for _, s := range d.plan.steps {
		after := statusPlanned && s.kind > writeStatus
		if s.kind == writeStatus || s.kind == releaseFinalizer || after != afterStatus {
			continue
		}
		var err error
		switch s.kind {
		case cutLease:
			if sr.lease, err = r.revokeOnLease(ctx, fl, w.slot, d, sr.lease); err != nil {
				err = fmt.Errorf("revoking on the Lease: %w", err)
			}
			sr.done.leaseCut = err == nil
		case tellCutOff:
			r.tellCutOff(fl, w.fl.Status.Holder, d)
		case writeLease:
			if err = r.syncLease(ctx, fl, w.slot, sr.lease, w.held.renewal); err != nil {
				err = fmt.Errorf("writing Lease: %w", err)
			}
			sr.done.lease = err == nil
		case demoteEnded:
			if p := findPod(sr.pods, d.end.holder.PodUID); p != nil {
				err = r.demote(ctx, fl, p)
			}
		case demotePods:
			err = r.demotePods(ctx, fl, sr.pods)
		case promoteHolder:
			err = r.promoteHolder(ctx, fl, w.slot, sr.pods)
		case deleteRevoked:
			err = r.deleteRevokedPods(ctx, fl, sr.pods)
		}
		if err != nil {
			return err
		}
		if t := sr.turn; t != nil && s.kind == grantStep(d) {
			t.tell(true)
		}
	}
	return nil
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
