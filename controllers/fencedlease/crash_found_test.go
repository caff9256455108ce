package fencedlease

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// The defects below were found by the generated histories (history_test.go); each test
// is its shortest history, written out.

// unlabel takes the lease label off pod name, as `kubectl label pod name <label>-` does.
func (f *casFixture) unlabel(t *testing.T, name string) {
	t.Helper()
	p := f.pod(t, name)
	delete(p.Labels, fencingv1.LeaseLabel)
	if err := f.c.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// killedAfter runs one pass that dies after its n-th write, then restarts the operator.
func (f *casFixture) killedAfter(t *testing.T, n int) {
	t.Helper()
	real := f.r.Client
	f.r.Client = &crashingClient{Client: real, budget: n}
	if _, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil && !errors.Is(err, errCrashed) {
		t.Fatal(err)
	}
	f.r.Client = real
	f.restart()
}

// runFor runs the operator n passes, 700 ms apart, checking the invariants after each.
func (f *casFixture) runFor(t *testing.T, v *invariants, n int) {
	t.Helper()
	for range n {
		f.clock.Step(700 * time.Millisecond)
		f.reconcile(t)
		v.check(t, f.c)
	}
}

// A grant made on the Lease (G2) is released there by its holder, whose lease label a
// user then takes off, before the status recorded it: the pod is found by its UID, the
// grant recorded and its marks taken back — it is never left Holding beside the next
// holder.
func TestAGrantReleasedOnTheLeaseByAPodThatLostItsLabelIsTakenBack(t *testing.T) {
	f := newIdleFixture(t, 0)
	v := newInvariants()
	f.reconcile(t) // a is granted token 1 on the Lease and patched Holding (Cold)
	if a := f.pod(t, "a"); grantorder.PodState(a) != fencingv1.PodHolding {
		t.Fatalf("a after its grant: %s", grantorder.PodState(a))
	}
	leaseHolderReleases(t, f, key)
	f.unlabel(t, "a")
	f.restart()
	f.runFor(t, v, 8)
	if a := f.pod(t, "a"); grantorder.PodState(a) == fencingv1.PodHolding || a.Labels[fencingv1.HolderLabel] != "" {
		t.Fatalf("a released token 1 and lost its label, yet shows %s with labels %v", grantorder.PodState(a), a.Labels)
	}
}

// spec.minFencingToken is raised while a grant made on the Lease waits for its status
// write: the grant is recorded with its own token, the Lease keeps that token (the
// holder's library stops on any other), and the pod is never granted a second token.
func TestMinFencingTokenRaisedDuringAGrantOnTheLeaseKeepsTheHoldersToken(t *testing.T) {
	f := newIdleFixture(t, 0)
	v := newInvariants()
	f.reconcile(t) // a: token 1 on the Lease
	f.edit(t, func(fl *fencingv1.FencedLease) { fl.Spec.MinFencingToken = 5 }, false)
	f.restart()
	f.runFor(t, v, 4)
	if got := leaserecord.Read(f.lease(t)); got.Token != 1 || got.Holder != "a" {
		t.Fatalf("the Lease shows %q with token %d, want a with its token 1", got.Holder, got.Token)
	}
	if name, token, _ := f.holder(t); name != "a" || token != 1 {
		t.Fatalf("holder %s token %d, want a's grant of token 1 recorded as made", name, token)
	}
	f.pastCoalesce(t)
	// Released, the next grant goes above the floor.
	leaseHolderReleases(t, f, key)
	f.runFor(t, v, 4)
	if name, token, _ := f.holder(t); name != "b" || token != 6 {
		t.Fatalf("holder %s token %d, want b granted above minFencingToken 5", name, token)
	}
}

// spec.holders is lowered to 1 before any slot's status write landed, while slot 1's
// Lease records a grant: that grant is judged (asked to hand off), never orphaned, and
// no token names two pods.
func TestHoldersLoweredBeforeTheSlotsStatusLandedStillJudgesTheSlotsGrant(t *testing.T) {
	fl := newFL(10)
	fl.Finalizers = []string{fencingv1.Finalizer}
	fl.Spec.Holders = 2
	a, b := pod("a", t0), warmPod("b", t0.Add(time.Second))
	b.Status.Phase = corev1.PodRunning
	f := fixtureOf(fl, &a, &b)
	v := newInvariants()
	f.killedAfter(t, 3) // both slots granted on their Leases (a Cold, patched; b Warm); no status written
	v.check(t, f.c)
	f.edit(t, func(fl *fencingv1.FencedLease) { fl.Spec.Holders = 1 }, false)
	f.runFor(t, v, 4)
	st := f.fl(t).Status
	if s1 := decision.SlotOf(&st, 1); s1.Holder == nil || s1.Holder.Handoff == nil || s1.Holder.Handoff.SuccessorName != fencingv1.SlotRemovedSuccessor {
		t.Fatalf("slot 1 after holders was lowered: %+v, want its grant recorded and asked to hand off (H6)", s1)
	}
}

// A release is recorded in the status of a FencedLease with slots (which keeps no
// record of a release but the pod's mark), and the operator dies before it clears the
// Lease: the grant is not adopted a second time off the Lease.
func TestASlotsReleaseIsNotAdoptedAgainAfterACrashBeforeTheLeaseWrite(t *testing.T) {
	f := newSlotsFixture(t)
	v := newInvariants()
	v.check(t, f.c)
	leaseHolderReleases(t, f, key)
	f.killedAfter(t, 2) // a marked Released, the status written; the Lease still shows a's release
	v.check(t, f.c)
	f.runFor(t, v, 4)
	st := f.fl(t).Status
	if h := decision.SlotOf(&st, 0).Holder; h != nil {
		t.Fatalf("slot 0 holds %s again after a released it", h.PodName)
	}
	if st.Transitions != 2 {
		t.Fatalf("transitions %d, want the two grants made, none adopted twice", st.Transitions)
	}
}

// A revoke request hands a never-renewed grant over to a Warm standby: that pass writes
// the Lease alone (P1). A user takes the lease label off the old holder's pod before the
// follow-up: the follow-up still finds it (by UID) and marks it Revoked, so it is never
// left Holding beside the new holder.
func TestAnOldHolderThatLostItsLabelDuringAWarmHandOverIsStillMarked(t *testing.T) {
	f := newCASFixtureWaiting(t, warmPod("b", t0.Add(time.Second)))
	v := newInvariants()
	f.edit(t, func(fl *fencingv1.FencedLease) { fl.Annotations = map[string]string{fencingv1.RevokeAnnotation: "1"} }, false)
	f.reconcile(t) // handed over to b on the Lease alone
	if got := leaserecord.Read(f.lease(t)); !got.Shows("b", "uid-b", 2) {
		t.Fatalf("the hand-over did not reach the Lease: %+v", got)
	}
	f.unlabel(t, "a")
	f.clock.Step(100 * time.Millisecond)
	f.reconcile(t)
	v.check(t, f.c)
	f.runFor(t, v, 4)
	if !f.podGone(t, "a") {
		if st := grantorder.PodState(f.pod(t, "a")); st != fencingv1.PodRevoked {
			t.Fatalf("the revoked pod a, its label taken off, shows %s", st)
		}
	}
}

// A grant made on the Lease (G2) is released there and its pod deleted before the status
// recorded it: nobody is left to record, but the grant was made — its token stays spent
// and counted (transitions), so every token spent is carried by a grant.
func TestAGrantOnlyTheLeaseRecordedWhosePodIsGoneIsCounted(t *testing.T) {
	f := newIdleFixture(t, 0)
	v := newInvariants()
	f.reconcile(t) // a: token 1 on the Lease
	leaseHolderReleases(t, f, key)
	if err := f.c.Delete(context.Background(), f.pod(t, "a")); err != nil {
		t.Fatal(err)
	}
	f.runFor(t, v, 6)
	st := f.fl(t).Status
	if st.Holder == nil || st.Holder.PodName != "b" || st.Holder.Token != 2 || st.FencingToken != 2 || st.Transitions != 2 {
		t.Fatalf("status %s token %d transitions %d, want b holding token 2 after two grants", holderLine(st.Holder), st.FencingToken, st.Transitions)
	}
}

// A holder cut off because its container cannot run (X9, C1) is revoked once its lease
// has run out (C2); the operator killed after that pass's first write (the pod marked
// Revoked, X5) must, restarted, finish the revocation for the reason it was cut off —
// never wait the lease out again and mark the pod Holding again.
func TestACutOffHolderMarkedRevokedBeforeACrashStaysRevoked(t *testing.T) {
	f := newCASFixture(t)
	v := newInvariants()
	f.renew(t)
	f.reconcile(t)
	a := f.pod(t, "a")
	a.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
	if err := f.c.Status().Update(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t)
	v.note("a's container in CrashLoopBackOff: cut off")
	v.check(t, f.c)
	if rec := leaserecord.Read(f.lease(t)); rec.Holder != "" || rec.CutOffReason != string(fencingv1.ReasonPodCannotRun) {
		t.Fatalf("the Lease shows %+v, want a cut off for PodCannotRun", rec)
	}
	f.clock.Step(12 * time.Second)
	for k := 1; k <= 3; k++ {
		f.killedAfter(t, k)
		v.note("pass killed after %d write(s)", k)
		v.check(t, f.c)
	}
	f.runFor(t, v, 10)
	if rv := f.lastRevocation(t); rv == nil || rv.PodName != "a" || rv.Reason != fencingv1.ReasonPodCannotRun {
		t.Fatalf("revocation %+v, want a's PodCannotRun", rv)
	}
}
