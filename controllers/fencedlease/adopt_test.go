package fencedlease

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// handedOverToB is the CAS fixture a startup deadline later: a revoked, and the Lease
// naming b with token 2 while the status write waits for b's first renewal.
func handedOverToB(t *testing.T) *casFixture {
	t.Helper()
	f := newCASFixture(t)
	f.clock.Step(11 * time.Second)
	f.reconcile(t)
	if got := leaserecord.Read(f.lease(t)); !got.Shows("b", "uid-b", 2) {
		t.Fatalf("the Lease shows %+v, want the hand-over to b's token 2", got)
	}
	if name, _, _ := f.holder(t); name != "a" {
		t.Fatalf("the status names %q during the wait, want a still", name)
	}
	return f
}

// A FencedLease deleted while a grant is on the Lease only — a grant on the idle
// FencedLease (G2), or a hand-over, whose status write waits — keeps its finalizer until
// that grant is adopted and revoked (D1): its holder may be at work, and the tombstone must
// name nobody.
func TestADeletionDuringTheWaitRevokesTheGrantOnlyTheLeaseRecords(t *testing.T) {
	for _, handOver := range []bool{false, true} {
		holder, token := "a", int64(1)
		var f *casFixture
		if handOver {
			f, holder, token = handedOverToB(t), "b", 2
		} else {
			f = newIdleFixture(t, 0)
			f.reconcile(t)
			if got := leaserecord.Read(f.lease(t)); !got.Shows("a", "uid-a", 1) {
				t.Fatalf("the Lease shows %+v, want a's grant of token 1", got)
			}
		}
		if err := f.c.Delete(t.Context(), f.fl(t)); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			f.reconcile(t)
		}
		if got := leaserecord.Read(f.lease(t)); got.Holder != "" || got.Token != token {
			t.Fatalf("handOver=%v: the tombstone shows %+v, want no holder and token %d", handOver, got, token)
		}
		if err := f.c.Get(t.Context(), key, &fencingv1.FencedLease{}); !apierrors.IsNotFound(err) {
			t.Fatalf("handOver=%v: the FencedLease is still there after its holder was revoked: %v", handOver, err)
		}
		p := &corev1.Pod{}
		if err := f.c.Get(t.Context(), client.ObjectKey{Namespace: key.Namespace, Name: holder}, p); err == nil &&
			p.Annotations[fencingv1.StateAnnotation] != string(fencingv1.PodRevoked) {
			t.Fatalf("handOver=%v: %s's pod shows %q, want Revoked (or deleted)", handOver, holder, p.Annotations[fencingv1.StateAnnotation])
		}
	}
}

// A grant adopted off the Lease is judged by the holder rules at once, not at the end of
// its startup deadline: the rules have not seen it yet, and what they would act on — a
// pod reporting that it cannot start, a holder that renewed and then stopped — may bring
// no further event.
func TestAGrantAdoptedOffTheLeaseIsJudgedAtOnce(t *testing.T) {
	f := newCASFixture(t)
	f.edit(t, func(fl *fencingv1.FencedLease) { fl.Spec.StartupDeadlineSeconds = 300 }, false)
	f.clock.Step(301 * time.Second)
	f.reconcile(t) // a never started: handed over to b on the Lease
	if got := leaserecord.Read(f.lease(t)); !got.Shows("b", "uid-b", 2) {
		t.Fatalf("the Lease shows %+v, want the hand-over to b's token 2", got)
	}
	b := f.pod(t, "b")
	b.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "work",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
	if err := f.c.Status().Update(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(decision.StatusCoalesce)
	res, err := f.r.Reconcile(t.Context(), ctrl.Request{NamespacedName: key})
	if err != nil {
		t.Fatal(err)
	}
	if name, token, _ := f.holder(t); name != "b" || token != 2 {
		t.Fatalf("the wait is over and the status names %q with token %d, want b with 2", name, token)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > decision.AdoptedRecheck {
		t.Fatalf("requeue after %v once the grant is recorded, want at most %v (not its 300 s startup deadline)", res.RequeueAfter, decision.AdoptedRecheck)
	}
	f.reconcile(t)
	if got := leaserecord.Read(f.lease(t)); got.Holder != "" || got.Token != 2 {
		t.Fatalf("the Lease shows %+v, want b's grant ended", got)
	}
	if rv := f.lastRevocation(t); rv == nil || rv.PodName != "b" || rv.Reason != fencingv1.ReasonPodCannotStart {
		t.Fatalf("revocation %+v, want b's PodCannotStart", rv)
	}
}
