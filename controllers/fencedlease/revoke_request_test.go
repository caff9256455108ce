package fencedlease

import (
	"testing"
	"time"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// A revoke request cuts the holder off at once and revokes when the lease it last renewed
// runs out, never earlier; it names a token, so it never reaches a later grant; and a
// controller that restarts between the cut-off and the revocation still waits. (Q2, C1, C2)
func TestRevokeRequestCutsOffThenRevokesWhenTheLeaseRunsOut(t *testing.T) {
	c, tr, fl, pods, h := grantedRollout(10, 0)
	c.Step(time.Second)
	stepHandoff(tr, c, fl, leaseFor(h, t0.Add(time.Second)), pods, nil) // renewed at +1s

	fl.Annotations = map[string]string{fencingv1.RevokeAnnotation: "7"} // not its token
	c.Step(time.Second)
	if d := stepHandoff(tr, c, fl, leaseFor(h, t0.Add(2*time.Second)), pods, nil); d.CutOff() || d.Revoked() != nil {
		t.Fatalf("a request for token 7 touched token 1: %+v", d)
	}

	fl.Annotations[fencingv1.RevokeAnnotation] = "1"
	c.Step(time.Second) // +3s; last renewal observed at +2s
	d := stepHandoff(tr, c, fl, leaseFor(h, t0.Add(2*time.Second)), pods, nil)
	if !d.CutOff() || !d.CutOffOnRequest() || d.Revoked() != nil || d.Granted() != nil || fl.Status.Holder == nil {
		t.Fatalf("want a cut-off only: %+v", d)
	}
	if d.RequeueAfter != 9*time.Second {
		t.Fatalf("look again when the lease runs out (+2s + 10s, now +3s): %v", d.RequeueAfter)
	}

	// The Lease no longer names it (no UID: cleared by the controller, not released).
	cut := cutOffLease(h, t0.Add(2*time.Second))
	c.Step(9*time.Second - time.Millisecond)
	if d := stepHandoff(tr, c, fl, cut, pods, nil); d.Revoked() != nil || d.Granted() != nil || d.RequeueAfter != time.Millisecond {
		t.Fatalf("revoked or granted before the lease ran out: %+v", d)
	}

	// A restarted controller gives the cut-off holder a whole lease from its first look.
	restarted := decision.NewGrantMemory(c)
	if d := stepHandoff(restarted, c, fl, cut, pods, nil); d.Revoked() != nil || d.RequeueAfter != 10*time.Second {
		t.Fatalf("a new controller must wait a whole lease: %+v", d)
	}
	c.Step(time.Millisecond)
	d = stepHandoff(tr, c, fl, cut, pods, nil)
	if d.Revoked() == nil || d.Revoked().Reason != fencingv1.ReasonRevokeRequested || d.Revoked().Token != 1 {
		t.Fatalf("want token 1 revoked as RevokeRequested, got %+v", d.Revoked())
	}
	if d.Granted() == nil || d.Granted().PodName != "b" || d.Granted().Token != 2 {
		t.Fatalf("want b granted token 2, got %+v", d.Granted())
	}

	// The annotation stays, naming token 1: the new holder keeps renewing undisturbed.
	c.Step(time.Second)
	if d := stepHandoff(tr, c, fl, leaseFor(d.Granted(), c.Now()), pods, nil); d.CutOff() || d.Revoked() != nil {
		t.Fatalf("the old request reached token 2: %+v", d)
	}
}

// A grant that never renewed never ran: a revoke request revokes it at once (the
// revocation's compare-and-swap on the Lease refuses a first renewal in flight), and the
// next pod is granted in the same decision.
func TestRevokeRequestOfAGrantThatNeverRenewedIsImmediate(t *testing.T) {
	c, tr, fl, pods, h := grantedRollout(10, 0)
	c.Step(time.Second)
	fl.Annotations = map[string]string{fencingv1.RevokeAnnotation: "1"}
	d := stepHandoff(tr, c, fl, leaseFor(h, t0), pods, nil) // the Lease as granted: RenewTime = acquireTime
	if d.Revoked() == nil || d.Revoked().Reason != fencingv1.ReasonRevokeRequested || d.CutOff() {
		t.Fatalf("want token 1 revoked now as RevokeRequested, got %+v", d)
	}
	if d.Granted() == nil || d.Granted().PodName != "b" || d.Granted().Token != 2 {
		t.Fatalf("want b granted token 2, got %+v", d.Granted())
	}
}
