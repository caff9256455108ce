package fencedlease

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
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
	statusPlanned := d.Plan.Has(decision.WriteStatus)
	if t := sr.turn; t != nil && !afterStatus {
		defer t.tell(false) // not landed, unless told so below
		if !t.wait() {
			return errGrantBelowFailed
		}
	}
	for _, s := range d.Plan.Steps {
		after := statusPlanned && s.Kind > decision.WriteStatus
		if s.Kind == decision.WriteStatus || s.Kind == decision.ReleaseFinalizer || after != afterStatus {
			continue
		}
		var err error
		switch s.Kind {
		case decision.CutLease:
			if sr.lease, err = r.revokeOnLease(ctx, fl, w.Slot, d, sr.lease); err != nil {
				err = fmt.Errorf("revoking on the Lease: %w", err)
			}
			sr.done.LeaseCut = err == nil
		case decision.TellCutOff:
			r.tellCutOff(fl, w.Fl.Status.Holder, d)
		case decision.WriteLease:
			if err = r.syncLease(ctx, fl, w.Slot, sr.lease, w.Held.Renewal); err != nil {
				err = fmt.Errorf("writing Lease: %w", err)
			}
			sr.done.Lease = err == nil
		case decision.DemoteEnded:
			if p := decision.FindPod(sr.pods, d.End.Holder.PodUID); p != nil {
				err = r.demote(ctx, fl, p)
			}
		case decision.DemotePods:
			err = r.demotePods(ctx, fl, sr.pods)
		case decision.PromoteHolder:
			err = r.promoteHolder(ctx, fl, w.Slot, sr.pods)
		case decision.DeleteRevoked:
			err = r.deleteRevokedPods(ctx, fl, sr.pods)
		}
		if err != nil {
			return err
		}
		if t := sr.turn; t != nil && s.Kind == decision.GrantStep(d) {
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
func (r *Reconciler) revokeOnLease(ctx context.Context, fl *fencingv1.FencedLease, s decision.SlotFrame, d decision.Decision, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if !d.LeaseShowsHolder {
		return lease, nil // the grant never reached the Lease: nobody could renew it
	}
	next := lease.DeepCopy()
	if d.Grant != nil {
		next = leaseShowing(fl, s, &d.Status, lease, decision.Renewal{})
	} else {
		var reason fencingv1.RevocationReason
		switch t := d.End; {
		case t != nil && t.Kind == decision.CutOff && t.Revocation == fencingv1.ReasonPodCannotRun:
			// Only the Lease can say why this holder stands cut off (see WaitingOutCutOff).
			reason = t.Revocation
		case t != nil && t.Kind == decision.Revoke:
			// Revoked here and now (X3): a restart before the status records it (X4) still
			// finishes it for this reason (FinishRevocationRule).
			reason = t.Revocation
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

// TellCutOff tells the user of holder h cut off on request or because its pod cannot
// run (Q2, X9): its renewals are refused from now on, and it is revoked when the lease
// it last renewed has run out.
func (r *Reconciler) tellCutOff(fl *fencingv1.FencedLease, h *fencingv1.Holder, d decision.Decision) {
	pod, left := podRef(fl.Namespace, h.PodName, h.PodUID), d.RequeueAfter.Round(time.Millisecond)
	if d.CutOffOnRequest() {
		r.event(fl, pod, true, corev1.EventTypeWarning, "RevokeRequested", "Revoke",
			fmt.Sprintf("revoking token %d of pod %s as requested (%s): its renewals are refused from now on, and the next pod is granted once its lease has run out, in at most %v",
				h.Token, h.PodName, fencingv1.RevokeAnnotation, left))
		return
	}
	r.event(fl, pod, true, corev1.EventTypeWarning, string(fencingv1.ReasonPodCannotRun), "Revoke",
		fmt.Sprintf("revoking token %d of pod %s: %s; its renewals are refused from now on, and the next pod is granted once its lease has run out, in at most %v",
			h.Token, h.PodName, d.End.Message, left))
}
