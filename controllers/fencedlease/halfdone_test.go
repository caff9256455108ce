package fencedlease

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// failingStatus refuses the next status write with a Conflict while armed: the write X4
// losing a race (or the controller crashing) after X3 cleared the Lease.
type failingStatus struct {
	client.Client
	armed bool
}

func (f *failingStatus) Status() client.SubResourceWriter {
	return &failingStatusWriter{SubResourceWriter: f.Client.Status(), f: f}
}

type failingStatusWriter struct {
	client.SubResourceWriter
	f *failingStatus
}

func (w *failingStatusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if w.f.armed {
		w.f.armed = false
		return apierrors.NewConflict(schema.GroupResource{Group: fencingv1.GroupVersion.Group, Resource: "fencedleases"}, obj.GetName(), nil)
	}
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

// failStatusOnce makes the fixture's next status write fail.
func (f *casFixture) failStatusOnce() *failingStatus {
	fs := &failingStatus{Client: f.r.Client, armed: true}
	f.r.Client = fs
	return fs
}

func (f *casFixture) lastRevocation(t *testing.T) *fencingv1.Revocation {
	t.Helper()
	return f.fl(t).Status.LastRevocation
}

func (f *casFixture) edit(t *testing.T, change func(*fencingv1.FencedLease), status bool) {
	t.Helper()
	fl := &fencingv1.FencedLease{}
	if err := f.c.Get(context.Background(), key, fl); err != nil {
		t.Fatal(err)
	}
	change(fl)
	var err error
	if status {
		err = f.c.Status().Update(context.Background(), fl)
	} else {
		err = f.c.Update(context.Background(), fl)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Defect (a): a revoke request for a grant that never renewed acts at once (Q1). When
// the status write fails after the Lease was cleared, the next reconcile — of this
// process, or of a restarted one — still revokes at once, not after the startup deadline.
func TestARevokeRequestOfANeverRenewedGrantFinishesAtOnceAfterAFailedStatusWrite(t *testing.T) {
	for _, restart := range []bool{false, true} {
		f := newCASFixture(t) // a holds token 1 and never renewed; startup deadline 10 s
		f.edit(t, func(fl *fencingv1.FencedLease) {
			fl.Annotations = map[string]string{fencingv1.RevokeAnnotation: "1"}
		}, false)
		f.clock.Step(time.Second)
		f.reconcile(t) // handed over to b on the Lease; the status waits for b's first renewal
		fs := f.failStatusOnce()
		f.pastCoalesce(t)
		if fs.armed {
			t.Fatal("the status write was never tried")
		}
		if name, _, _ := f.holder(t); name != "a" {
			t.Fatalf("the failed status write landed anyway: holder %q", name)
		}
		if restart {
			f.r.grants = decision.NewGrantMemory(f.clock)
		}
		f.clock.Step(100 * time.Millisecond)
		f.reconcile(t)
		if name, token, revocations := f.holder(t); name != "b" || token != 2 || revocations != 1 {
			t.Fatalf("restart=%v: holder %s token %d revocations %d, want b granted token 2 at once", restart, name, token, revocations)
		}
		if rv := f.lastRevocation(t); rv.Reason != fencingv1.ReasonRevokeRequested || rv.Token != 1 {
			t.Fatalf("restart=%v: revoked as %s, want RevokeRequested", restart, rv.Reason)
		}
	}
}

// Defect (b): a draining holder (asked to hand off, grace period not over) whose lease
// runs out is revoked for LeaseExpired, with its lateness. When the status write fails
// after the Lease was cleared, the reconcile that finishes it keeps that reason and
// observes the lateness once, instead of calling it HandoffTimeout and losing the sample.
func TestAnExpiredDrainingHolderStaysLeaseExpiredAfterAFailedStatusWrite(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) { expiredDrainingHolderAfterAFailedStatusWrite(t, restart) })
	}
}

// The same with nobody to hand over to (the successor went): the Lease is cleared (X3),
// not handed over, and a restarted process, which no longer remembers why, reads it off
// the Lease — not as a hand-off cut-off that ran out (HandoffTimeout).
func TestAnExpiredDrainingHolderCutOffStaysLeaseExpiredAfterARestart(t *testing.T) {
	f := newCASFixture(t)
	f.renew(t)
	f.reconcile(t)
	f.edit(t, func(fl *fencingv1.FencedLease) {
		fl.Status.Holder.Handoff = &fencingv1.Handoff{SuccessorName: "b", SuccessorUID: "uid-b",
			RequestTime: *decision.MicroTime(f.clock.Now()), GracePeriodSeconds: 30}
	}, true)
	f.reconcile(t)
	if err := f.c.Delete(context.Background(), f.pod(t, "b")); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(11 * time.Second) // expired, the grace period not over, nobody waiting
	f.failStatusOnce()
	f.reconcile(t)
	if l := f.lease(t); l.Spec.HolderIdentity != nil {
		t.Fatalf("want the Lease cleared, it names %q", *l.Spec.HolderIdentity)
	}
	if name, _, _ := f.holder(t); name != "a" {
		t.Fatalf("the failed status write landed anyway: holder %q", name)
	}
	f.r.grants = decision.NewGrantMemory(f.clock) // restarted
	f.clock.Step(100 * time.Millisecond)
	f.reconcile(t)
	if rv := f.lastRevocation(t); rv == nil || rv.Reason != fencingv1.ReasonLeaseExpired || rv.Token != 1 {
		t.Fatalf("revoked as %+v, want token 1 LeaseExpired: the grace period was not over", rv)
	}
}

func expiredDrainingHolderAfterAFailedStatusWrite(t *testing.T, restart bool) {
	f := newCASFixture(t)
	f.renew(t)
	f.reconcile(t) // a renewed at t0: it runs on its 10 s lease from here
	f.edit(t, func(fl *fencingv1.FencedLease) {
		fl.Status.Holder.Handoff = &fencingv1.Handoff{SuccessorName: "b", SuccessorUID: "uid-b",
			RequestTime: *decision.MicroTime(f.clock.Now()), GracePeriodSeconds: 30}
	}, true)
	f.reconcile(t) // the grace period starts; 30 s, far longer than the lease

	f.clock.Step(11 * time.Second) // expired a second ago, the grace period not over
	f.reconcile(t)                 // handed over on the Lease; the status waits
	f.failStatusOnce()
	f.pastCoalesce(t)
	if name, _, _ := f.holder(t); name != "a" {
		t.Fatalf("the failed status write landed anyway: holder %q", name)
	}
	if restart {
		f.r.grants = decision.NewGrantMemory(f.clock)
	}
	f.clock.Step(100 * time.Millisecond)
	f.reconcile(t)
	if name, token, _ := f.holder(t); name != "b" || token != 2 {
		t.Fatalf("holder %s token %d, want b token 2", name, token)
	}
	if rv := f.lastRevocation(t); rv.Reason != fencingv1.ReasonLeaseExpired {
		t.Fatalf("revoked as %s, want LeaseExpired: the grace period was not over", rv.Reason)
	}
	m := &dto.Metric{}
	if err := f.r.metrics.lateness.Write(m); err != nil {
		t.Fatal(err)
	}
	if restart {
		return // a restarted process does not know the lateness of a revocation it did not decide
	}
	if n, sum := m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum(); n != 1 || sum < 0.9 || sum > 1.2 {
		t.Fatalf("lateness histogram has %d samples summing to %.3fs, want one of about 1s", n, sum)
	}
}

func (f *casFixture) lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	return fetch(t, f.c, key, &coordinationv1.Lease{})
}

// The hand-over (X3 with G2): an expired holder's grant moves to the next pod in one
// compare-and-swap of the Lease, not a clear and a second write; b's pod gets its token
// at once, a's deletion follows (P1); the status then records, in one write with b's first renewal, what the Lease
// already shows, and the Lease is not written again. (X5)
func TestAFailoverMovesTheGrantOnTheLeaseInOneWrite(t *testing.T) {
	f := newCASFixture(t)
	before, statusBefore := f.lease(t).ResourceVersion, f.fl(t).ResourceVersion
	f.clock.Step(11 * time.Second)
	handedOverAt := f.clock.Now()
	res := f.reconcileFor(t)
	f.expectGrantOnLeaseInOneWrite(t, before, "b", 2)
	// b is Cold: it starts when its pod is patched, in the pass that handed over, after
	// a's demotion; a's deletion follows in the next pass (P1).
	if a := f.pod(t, "a"); grantorder.PodState(a) != fencingv1.PodRevoked || a.Labels[fencingv1.HolderLabel] != "" {
		t.Fatalf("a's pod after the hand-over's pass: %v %v, want marked Revoked without the holder label", a.Annotations, a.Labels)
	}
	f.expectFollowUp(t, res)
	if !f.podGone(t, "a") {
		t.Fatal("the follow-up pass did not delete a's pod (DeletePod)")
	}
	if token := f.pod(t, "b").Annotations[fencingv1.TokenAnnotation]; token != "2" {
		t.Fatalf("b's pod shows token %q right after the hand-over, want 2", token)
	}
	if name, _, _ := f.holder(t); name != "a" {
		t.Fatalf("the status was written before b's first renewal: holder %s", name)
	}
	reads := f.reader.podReads
	f.clock.Step(100 * time.Millisecond)
	f.reconcile(t) // an event in the wait: a's pod is gone, and nobody asks for it again
	if n := f.reader.podReads - reads; n != 0 {
		t.Fatalf("%d uncached reads of the handed-over holder's pod while the status waits, want 0", n)
	}

	f.clock.Step(200 * time.Millisecond)
	f.renew(t) // b's first renewal
	res = f.reconcileFor(t)
	if name, token, revocations := f.holder(t); name != "b" || token != 2 || revocations != 1 {
		t.Fatalf("holder %s token %d revocations %d, want b token 2", name, token, revocations)
	}
	if res.Priority == nil || *res.Priority != normalPriority {
		t.Fatalf("b's next judgment is queued at priority %v, want %d: follow-up priority ends with the follow-up", res.Priority, normalPriority)
	}
	fl := f.fl(t)
	if fl.Status.Holder.FirstRenewTime == nil || !meta.IsStatusConditionTrue(fl.Status.Conditions, fencingv1.ConditionReady) {
		t.Fatalf("b's first renewal is not recorded with its grant: %+v", fl.Status)
	}
	if writes := rvDistance(t, statusBefore, fl.ResourceVersion); writes != 1 {
		t.Fatalf("the FencedLease was written %d times in the failover and the first renewal, want 1", writes)
	}
	if rv := fl.Status.LastRevocation; !rv.Time.Equal(decision.MicroTime(handedOverAt)) || !fl.Status.Holder.AcquireTime.Equal(decision.MicroTime(handedOverAt)) {
		t.Fatalf("revoked at %v, b granted at %v: want both at the hand-over, %v, not when the status was written", rv.Time, fl.Status.Holder.AcquireTime, handedOverAt)
	}
	f.clock.Step(time.Second)
	f.reconcile(t)
	if writes := rvDistance(t, statusBefore, f.fl(t).ResourceVersion); writes != 1 {
		t.Fatalf("the FencedLease was written again after the failover: %d writes", writes)
	}
}

// A hand-over whose holder does not renew within the wait (a Cold pod still starting) is
// recorded when the wait is over, not later: as a grant that has not renewed yet. A
// process that did not make the hand-over (restarted) records it at its first look.
func TestAHandOverIsRecordedWhenTheWaitForItsFirstRenewalIsOver(t *testing.T) {
	for _, restart := range []bool{false, true} {
		f := newCASFixture(t)
		f.clock.Step(11 * time.Second)
		f.reconcile(t)
		fl := f.endTheWait(t, restart, "a", "b", 2)
		if rv := fl.Status.LastRevocation; rv == nil || rv.PodName != "a" || rv.Reason != fencingv1.ReasonStartupDeadlineExceeded {
			t.Fatalf("restart=%v: revocation %+v, want a's StartupDeadlineExceeded", restart, rv)
		}
	}
}

// endTheWait follows a grant only the Lease records to the status: restart makes a new
// tracker (a process that did not write it records it at once); else the status still
// names before until 100 ms before the wait ends, and names the grant (pod, token, not
// renewed yet: HolderStarting) when it has. It returns the FencedLease as recorded.
func (f *casFixture) endTheWait(t *testing.T, restart bool, before, pod string, token int64) *fencingv1.FencedLease {
	t.Helper()
	if restart {
		f.r.grants = decision.NewGrantMemory(f.clock)
	} else {
		f.clock.Step(decision.CoalesceWindow(&fencingv1.Holder{LeaseDurationSeconds: 10}, f.fl(t)) - 100*time.Millisecond)
		f.reconcile(t)
		if name, _, _ := f.holder(t); name != before {
			t.Fatalf("the status was written before the wait was over: holder %q", name)
		}
		f.clock.Step(100 * time.Millisecond)
	}
	f.reconcile(t)
	fl := f.fl(t)
	if h := fl.Status.Holder; h == nil || h.PodName != pod || h.Token != token || h.FirstRenewTime != nil {
		t.Fatalf("restart=%v: holder %+v, want %s's token %d, not renewed yet", restart, h, pod, token)
	}
	if c := meta.FindStatusCondition(fl.Status.Conditions, fencingv1.ConditionReady); c == nil || c.Reason != fencingv1.ReasonHolderStarting {
		t.Fatalf("restart=%v: Ready %+v, want HolderStarting", restart, c)
	}
	return fl
}

// expectGrantOnLeaseInOneWrite checks that the Lease names pod's grant of token, in one
// write since its version before.
func (f *casFixture) expectGrantOnLeaseInOneWrite(t *testing.T, before, pod string, token int64) {
	t.Helper()
	l := f.lease(t)
	if got := leaserecord.Read(l); !got.Shows(pod, types.UID("uid-"+pod), token) {
		t.Fatalf("the Lease shows %+v, want %s's grant of token %d", got, pod, token)
	}
	if writes := rvDistance(t, before, l.ResourceVersion); writes != 1 {
		t.Fatalf("the Lease was written %d times, want 1", writes)
	}
}

func (f *casFixture) fl(t *testing.T) *fencingv1.FencedLease {
	t.Helper()
	return fetch(t, f.c, key, &fencingv1.FencedLease{})
}

func (f *casFixture) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	return fetch(t, f.c, client.ObjectKey{Namespace: key.Namespace, Name: name}, &corev1.Pod{})
}

// podGone is true when the fake API server has no pod name.
func (f *casFixture) podGone(t *testing.T, name string) bool {
	t.Helper()
	err := f.c.Get(context.Background(), client.ObjectKey{Namespace: key.Namespace, Name: name}, &corev1.Pod{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

// fetch reads k into obj from the fixture's fake API server, or fails the test.
func fetch[T client.Object](t *testing.T, c client.Reader, k client.ObjectKey, obj T) T {
	t.Helper()
	if err := c.Get(context.Background(), k, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// pastCoalesce lets the wait of a hand-over's status write for the first renewal run out,
// and reconciles: the status is written now.
func (f *casFixture) pastCoalesce(t *testing.T) {
	t.Helper()
	f.clock.Step(decision.StatusCoalesce)
	f.reconcile(t)
}

// A hand-over whose status write fails (a conflict, a crash) is finished by the next
// reconcile — of this process or a restarted one — by adopting the grant the Lease shows:
// b keeps token 2, even when another candidate (c, older) would come first now, and the
// revocation keeps its reason.
func TestAHandOverWhoseStatusWriteFailedIsAdoptedOffTheLease(t *testing.T) {
	for _, restart := range []bool{false, true} {
		f := newCASFixture(t)
		f.renew(t)
		f.reconcile(t) // a renewed at t0: it runs on its 10 s lease from here
		f.clock.Step(11 * time.Second)
		f.reconcile(t) // handed over on the Lease; the status waits for b's first renewal
		fs := f.failStatusOnce()
		f.pastCoalesce(t)
		if fs.armed {
			t.Fatal("the status write was never tried")
		}
		if name, _, _ := f.holder(t); name != "a" {
			t.Fatalf("the failed status write landed anyway: holder %q", name)
		}
		if got := leaserecord.Read(f.lease(t)); !got.Shows("b", "uid-b", 2) {
			t.Fatalf("the hand-over did not reach the Lease: %+v", got)
		}
		c := pod("c", t0.Add(-time.Second)) // older than b: the grant rule would pick it first
		if err := f.c.Create(context.Background(), &c); err != nil {
			t.Fatal(err)
		}
		if restart {
			f.r.grants = decision.NewGrantMemory(f.clock)
		}
		f.clock.Step(100 * time.Millisecond)
		f.reconcile(t)
		if name, token, revocations := f.holder(t); name != "b" || token != 2 || revocations != 1 {
			t.Fatalf("restart=%v: holder %s token %d revocations %d, want b adopted with token 2", restart, name, token, revocations)
		}
		if rv := f.lastRevocation(t); rv.Reason != fencingv1.ReasonLeaseExpired || rv.Token != 1 || rv.PodName != "a" {
			t.Fatalf("restart=%v: revocation %+v, want a's token 1 as LeaseExpired", restart, rv)
		}
		if got := leaserecord.Read(f.lease(t)); !got.Shows("b", "uid-b", 2) {
			t.Fatalf("restart=%v: the Lease moved on after the adoption: %+v", restart, got)
		}
	}
}

// rvDistance is how many writes lie between two resourceVersions of one object in the
// fake client, which counts them up by one.
func rvDistance(t *testing.T, from, to string) int {
	t.Helper()
	a, err1 := strconv.Atoi(from)
	b, err2 := strconv.Atoi(to)
	if err1 != nil || err2 != nil {
		t.Fatalf("resourceVersions %q, %q", from, to)
	}
	return b - a
}

// A `kubectl label` that takes the lease label off the new holder while the status waits
// for its first renewal: the grant the Lease made is recorded all the same (token 2 is
// spent, never granted again), then revoked as LabelRemoved, like any holder's.
func TestALabelRemovedFromAHandedOverHolderDuringTheWaitRevokesIt(t *testing.T) {
	f := newCASFixture(t)
	f.clock.Step(11 * time.Second)
	f.reconcile(t) // handed over to b on the Lease; the status waits
	b := f.pod(t, "b")
	delete(b.Labels, fencingv1.LeaseLabel)
	if err := f.c.Update(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	f.pastCoalesce(t)
	if name, token, _ := f.holder(t); name != "b" || token != 2 {
		t.Fatalf("holder %s token %d, want b's handed-over grant of token 2 recorded", name, token)
	}
	f.clock.Step(100 * time.Millisecond)
	f.reconcile(t)
	fl := f.fl(t)
	if rv := fl.Status.LastRevocation; rv == nil || rv.PodName != "b" || rv.Token != 2 || rv.Reason != fencingv1.ReasonLabelRemoved {
		t.Fatalf("revocation %+v, want b's token 2 as LabelRemoved", rv)
	}
	if fl.Status.Holder != nil || fl.Status.FencingToken != 2 {
		t.Fatalf("holder %+v token %d after b's revocation, want none and token 2", fl.Status.Holder, fl.Status.FencingToken)
	}
}
