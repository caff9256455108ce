package fencedlease

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// runSteps carries out the steps of slot sr's plan that come before the pass's status
// write (afterStatus false) or after it (true), and stops at the first write that fails.
// Before: ending the grant on the Lease and demoting its pod when the slot's status
// records its decision; every step when its status waits (deferStatus), so a grant made
// on its Lease is there before the status counts its token. After: the Lease and the
// pods. The status and the finalizer are the pass's (pass.go). Each step carries what it
// writes; the FencedLease it writes is the slot's view carrying the decided status.
func (r *Reconciler) runSteps(ctx context.Context, sr *slotRun, afterStatus bool) error {
	plan, fl, slot := sr.d.Plan, sr.fl, sr.w.Slot
	statusPlanned := plan.Has(decision.WriteStatus)
	if t := sr.turn; t != nil && !afterStatus {
		defer t.tell(false) // not landed, unless told so below
		if !t.wait() {
			return errGrantBelowFailed
		}
	}
	for _, s := range plan.Steps {
		after := statusPlanned && s.Kind > decision.WriteStatus
		if s.Kind == decision.WriteStatus || s.Kind == decision.ReleaseFinalizer || after != afterStatus {
			continue
		}
		var err error
		switch s.Kind {
		case decision.CutLease:
			if sr.lease, err = r.cutOnLease(ctx, s.Lease, sr.lease); err != nil {
				err = fmt.Errorf("revoking on the Lease: %w", err)
			}
			sr.done.LeaseCut = err == nil
		case decision.TellCutOff:
			r.record(fl, *s.Event)
		case decision.WriteLease:
			if err = r.syncLease(ctx, fl, slot, sr.lease, s.Renewal); err != nil {
				err = fmt.Errorf("writing Lease: %w", err)
			}
			sr.done.Lease = err == nil
		case decision.DemoteEnded:
			if p := decision.FindPod(sr.pods, s.Pod); p != nil {
				err = r.demotePod(ctx, fl, p)
			}
		case decision.DemotePods:
			err = r.demotePods(ctx, fl, sr.pods)
		case decision.PromoteHolder:
			err = r.promoteHolder(ctx, fl, slot, sr.pods)
		case decision.DeleteRevoked:
			err = r.deleteRevokedPods(ctx, fl, sr.pods)
		}
		if err != nil {
			return err
		}
		if t := sr.turn; t != nil && s.LandsToken {
			t.tell(true)
		}
	}
	return nil
}

// cutOnLease writes next, the Lease the plan cuts the grant on, with a compare-and-swap
// on the version read (X3, C1): a renewal that landed since wins, and the decision is
// made again. nil next: the grant never reached the Lease; nothing is written.
func (r *Reconciler) cutOnLease(ctx context.Context, next, read *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if next == nil {
		return read, nil
	}
	next = next.DeepCopy() // the plan's stays as decided
	err := r.Update(ctx, next)
	r.ownWrites.after(next, read.ResourceVersion, err)
	if err != nil {
		return nil, err
	}
	return next, nil
}
