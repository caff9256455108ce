package fencedlease

import (
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// stepHandoff is step for a holder that may be asked to hand off: with successor (n of
// rollout()) the API server also holds the ReplicaSets that make n a newer revision of
// the holder's Deployment, so the real revision lookup finds it; without, it finds none.
func stepHandoff(tr *decision.GrantMemory, c *clocktesting.FakeClock, fl *fencingv1.FencedLease, lease *coordinationv1.Lease, pods []corev1.Pod, successor *corev1.Pod) decision.Decision {
	var extra []client.Object
	if successor != nil {
		if successor.Name != "n" {
			panic("stepHandoff: the successor of rollout() is n")
		}
		extra = append(extra, rolloutOld.DeepCopy(), rolloutNew.DeepCopy())
	}
	return observeStep(tr, c, fl, lease, pods, extra)
}

// cutOffLease is the Lease after the controller cut a holder off: no holder, no UID,
// the token and the last renewal kept.
func cutOffLease(h *fencingv1.Holder, renew time.Time) *coordinationv1.Lease {
	l := leaseFor(h, renew)
	l.Spec.HolderIdentity = nil
	delete(l.Annotations, fencingv1.HolderUIDAnnotation)
	return l
}

// The ReplicaSets of rollout(): revision 1 (a, b) and revision 2 (n) of Deployment app.
var (
	rolloutOld = replicaSetOf("app", "h1", "deploy-app", "1")
	rolloutNew = replicaSetOf("app", "h2", "deploy-app", "2")
)

// rollout is a holder a, an older-revision standby b, and a newer-revision pod n, each
// created after the one before.
func rollout() []corev1.Pod {
	return []corev1.Pod{*podOf(rolloutOld, "a", t0), *podOf(rolloutOld, "b", t0.Add(time.Second)), *podOf(rolloutNew, "n", t0.Add(2*time.Second))}
}

// grantedRollout is a FencedLease of lease d seconds and hand-off grace period grace whose
// first decision, at t0, granted a of rollout(); h is that grant.
func grantedRollout(d, grace int32) (*clocktesting.FakeClock, *decision.GrantMemory, *fencingv1.FencedLease, []corev1.Pod, *fencingv1.Holder) {
	c := clocktesting.NewFakeClock(t0)
	tr := decision.NewGrantMemory(c)
	fl := newFL(d)
	fl.Spec.HandoffGracePeriodSeconds = grace
	pods := rollout()
	stepHandoff(tr, c, fl, nil, pods, nil)
	return c, tr, fl, pods, fl.Status.Holder.DeepCopy()
}

// H1: a holder that has not renewed yet is not asked to hand off — it could not release,
// and a grace period running while its pod starts would cut it off before it ever worked
// (a rollout to an image that cannot start would then never let the old revision work).
// It is asked once it renewed, with a whole grace period from then.
func TestAHolderIsAskedToHandOffOnlyOnceItStarted(t *testing.T) {
	c, tr, fl, pods, h := grantedRollout(10, 5)
	c.Step(8 * time.Second) // its pod still starting, longer than the grace period
	if d := stepHandoff(tr, c, fl, leaseFor(h, t0), pods, &pods[2]); fl.Status.Holder.Handoff != nil || d.CutOff() || d.Revoked() != nil {
		t.Fatalf("a holder that never renewed was asked to hand off, or cut off: %+v", d)
	}
	c.Step(time.Second)
	d := stepHandoff(tr, c, fl, leaseFor(h, t0.Add(9*time.Second)), pods, &pods[2])
	if ho := fl.Status.Holder.Handoff; ho == nil || ho.SuccessorName != "n" || !ho.RequestTime.Time.Equal(c.Now()) {
		t.Fatalf("once it renewed, want a hand-off to n asked now, got %+v", ho)
	}
	if d.CutOff() || d.RequeueAfter != 5*time.Second {
		t.Fatalf("a whole grace period from the request: %+v", d)
	}
}

// Checks H1, H2.
func TestHandoffIsAskedAndTheSuccessorIsGrantedNextNotTheOldest(t *testing.T) {
	c, tr, fl, pods, h := grantedRollout(10, 5)

	c.Step(time.Second)
	d := stepHandoff(tr, c, fl, leaseFor(h, t0.Add(time.Second)), pods, &pods[2])
	ho := fl.Status.Holder.Handoff
	if ho == nil || ho.SuccessorName != "n" || ho.SuccessorUID != pods[2].UID || ho.GracePeriodSeconds != 5 {
		t.Fatalf("want a hand-off to n with 5s grace, got %+v", ho)
	}
	if d.Revoked() != nil || d.CutOff() || d.RequeueAfter != 5*time.Second {
		t.Fatalf("asking must not revoke or cut off, and must look again at the grace end: %+v", d)
	}
	if holdingState(fl.Status.Holder) != fencingv1.PodDraining {
		t.Fatalf("the holder pod should show Draining")
	}
	if m := fl.Status.Conditions[0].Message; !strings.Contains(m, "draining") || !strings.Contains(m, "n") {
		t.Fatalf("Held does not say the holder is draining: %q", m)
	}

	// The lookup no longer runs once asked: the request stands.
	c.Step(time.Second)
	stepHandoff(tr, c, fl, leaseFor(h, t0.Add(2*time.Second)), pods, nil)
	if fl.Status.Holder.Handoff == nil {
		t.Fatal("the hand-off request was withdrawn")
	}

	// The holder releases by clearing holderIdentity (its UID stays): n, not the older
	// standby b, is granted token 2 in the same decision.
	released := leaseFor(h, t0.Add(2*time.Second))
	released.Spec.HolderIdentity = nil
	d = stepHandoff(tr, c, fl, released, pods, nil)
	if d.Released() == nil || d.Granted() == nil || d.Granted().PodName != "n" || d.Granted().Token != 2 {
		t.Fatalf("want a released and n granted token 2, got released=%+v granted=%+v", d.Released(), d.Granted())
	}
	if d.Granted().Handoff != nil || fl.Status.Waiting != 1 {
		t.Fatalf("the new grant starts clean, b still waits: %+v", fl.Status)
	}
}

// A rollback (or a user) deletes the successor a hand-off named before the holder
// released: the request is withdrawn, the holder keeps its grant — not cut off when the
// grace period would have ended — and shows Holding again; a later request gets a whole
// grace period of its own. Measured on real nodes before: a Cold Deployment rolled back
// from a bad image lost its holder to HandoffTimeout after the rollback completed (H5).
func TestAHandoffWhoseSuccessorIsGoneIsWithdrawn(t *testing.T) {
	c, tr, fl, pods, h := grantedRollout(10, 5)
	c.Step(time.Second)
	stepHandoff(tr, c, fl, leaseFor(h, t0.Add(time.Second)), pods, &pods[2]) // asked at +1s for n
	if fl.Status.Holder.Handoff == nil {
		t.Fatal("the hand-off was not asked")
	}
	gone := slices.DeleteFunc(slices.Clone(pods), func(p corev1.Pod) bool { return p.Name == "n" })
	c.Step(time.Second)
	d := stepHandoff(tr, c, fl, leaseFor(h, t0.Add(2*time.Second)), gone, nil)
	if fl.Status.Holder == nil || fl.Status.Holder.Handoff != nil || d.CutOff() || d.Revoked() != nil {
		t.Fatalf("want the request withdrawn and a still holding: %+v", fl.Status.Holder)
	}
	if holdingState(fl.Status.Holder) != fencingv1.PodHolding {
		t.Fatal("the holder pod should show Holding again")
	}
	// Past when the grace period would have ended, still renewing: nothing happens.
	for _, at := range []time.Duration{7 * time.Second, 12 * time.Second} {
		c.SetTime(t0.Add(at))
		if d := stepHandoff(tr, c, fl, leaseFor(h, c.Now()), gone, nil); d.CutOff() || d.Revoked() != nil || fl.Status.Holder.PodName != "a" {
			t.Fatalf("+%v: the withdrawn hand-off cut the holder off: %+v", at, d)
		}
	}
	// A new successor waits: asked anew, with the whole grace period from now.
	c.SetTime(t0.Add(13 * time.Second))
	d = stepHandoff(tr, c, fl, leaseFor(h, c.Now()), pods, &pods[2])
	if fl.Status.Holder.Handoff == nil || d.RequeueAfter != 5*time.Second {
		t.Fatalf("want a new request with a whole 5 s grace period, got %+v (requeue %v)", fl.Status.Holder.Handoff, d.RequeueAfter)
	}
	c.Step(5*time.Second - time.Millisecond)
	if d := stepHandoff(tr, c, fl, leaseFor(h, c.Now()), pods, nil); d.CutOff() {
		t.Fatalf("the new request was cut short by the old one's start: %+v", d)
	}
}

// Checks H3, C1, C2.
func TestHandoffTimeoutCutsOffThenRevokesWhenTheLeaseRunsOut(t *testing.T) {
	c, tr, fl, pods, h := grantedRollout(10, 5)
	c.Step(time.Second)
	stepHandoff(tr, c, fl, leaseFor(h, t0.Add(time.Second)), pods, &pods[2]) // asked at +1s

	// It keeps renewing and never releases.
	c.Step(5*time.Second - time.Millisecond)
	if d := stepHandoff(tr, c, fl, leaseFor(h, t0.Add(5*time.Second)), pods, nil); d.CutOff() || d.Revoked() != nil {
		t.Fatalf("cut off before the grace period ended: %+v", d)
	}
	c.Step(time.Millisecond) // +6s: grace over; last renewal observed now
	d := stepHandoff(tr, c, fl, leaseFor(h, t0.Add(6*time.Second)), pods, nil)
	if !d.CutOff() || d.Revoked() != nil || d.Granted() != nil || fl.Status.Holder == nil {
		t.Fatalf("want a cut-off (no revocation, no grant yet): %+v", d)
	}

	// The Lease no longer names it: its renewals are refused. Nobody is granted until
	// the lease it last renewed runs out (+6s + 10s).
	cut := cutOffLease(h, t0.Add(6*time.Second))
	c.Step(10*time.Second - time.Millisecond)
	d = stepHandoff(tr, c, fl, cut, pods, nil)
	if d.Revoked() != nil || d.Granted() != nil || d.RequeueAfter != time.Millisecond {
		t.Fatalf("granted or revoked before the cut-off holder's lease ran out: %+v", d)
	}
	c.Step(time.Millisecond)
	d = stepHandoff(tr, c, fl, cut, pods, nil)
	if d.Revoked() == nil || d.Revoked().Reason != fencingv1.ReasonHandoffTimeout || d.Revoked().PodName != "a" {
		t.Fatalf("want a revoked for HandoffTimeout, got %+v", d.Revoked())
	}
	if d.Granted() == nil || d.Granted().PodName != "n" || d.Granted().Token != 2 {
		t.Fatalf("want n granted token 2, got %+v", d.Granted())
	}
}

func TestHandoffGraceRestartsWithTheController(t *testing.T) {
	c, tr, fl, pods, h := grantedRollout(10, 5)
	stepHandoff(tr, c, fl, leaseFor(h, t0.Add(time.Millisecond)), pods, &pods[2])

	c.Step(4 * time.Second)
	restarted := decision.NewGrantMemory(c)
	if d := stepHandoff(restarted, c, fl, leaseFor(h, t0.Add(4*time.Second)), pods, nil); d.CutOff() || d.RequeueAfter != 5*time.Second {
		t.Fatalf("a new controller must give the whole grace period again: %+v", d)
	}
}

// A holder asked to hand off that stops renewing expires as any other would: the
// request does not extend its lease, nor is a plain expiry called a hand-off timeout.
func TestDrainingHolderStillExpires(t *testing.T) {
	c, tr, fl, pods, h := grantedRollout(3, 60)
	stepHandoff(tr, c, fl, leaseFor(h, t0.Add(time.Millisecond)), pods, &pods[2])
	c.Step(3*time.Second + time.Millisecond)
	d := stepHandoff(tr, c, fl, leaseFor(h, t0.Add(time.Millisecond)), pods, nil)
	if d.Revoked() == nil || d.Revoked().Reason != fencingv1.ReasonLeaseExpired || d.Granted().PodName != "n" {
		t.Fatalf("want LeaseExpired and n granted, got %+v", d)
	}
}

// Checks X2.
func TestExpiryReason(t *testing.T) {
	for _, tc := range []struct {
		started, timedOut bool
		want              fencingv1.RevocationReason
	}{
		{false, false, fencingv1.ReasonStartupDeadlineExceeded},
		{false, true, fencingv1.ReasonStartupDeadlineExceeded}, // never ran: its pod must go
		{true, true, fencingv1.ReasonHandoffTimeout},
		{true, false, fencingv1.ReasonLeaseExpired},
	} {
		if got := decision.ExpiryReason(tc.started, tc.timedOut); got != tc.want {
			t.Errorf("expiryReason(%v, %v) = %s, want %s", tc.started, tc.timedOut, got, tc.want)
		}
	}
}
