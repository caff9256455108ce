package fencedlease

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// newIdleFixture is a FencedLease (10 s lease) with no holder and waiting pods a (older)
// and b; with a tombstone Lease carrying token high when high > 0.
func newIdleFixture(t *testing.T, high int64) *casFixture {
	t.Helper()
	fl := newFL(10)
	fl.Finalizers = []string{fencingv1.Finalizer}
	a, b := pod("a", t0), pod("b", t0.Add(time.Second))
	objs := []client.Object{fl, &a, &b}
	if high > 0 {
		objs = append(objs, tombstone(high))
	}
	return fixtureOf(objs...)
}

// newIdleWarmFixture is a Warm FencedLease whose last grant ended (its Lease the
// tombstone of token 4), with two candidates as admission leaves them: gated, no standby
// recorded (W1 has not let them run).
func newIdleWarmFixture(t *testing.T) *casFixture {
	t.Helper()
	fl := newFL(10)
	fl.Finalizers = []string{fencingv1.Finalizer}
	fl.Spec.Standby = fencingv1.StandbyWarm
	a, b := pod("a", t0), pod("b", t0.Add(time.Second))
	return fixtureOf(fl, &a, &b, tombstone(4))
}

func (f *casFixture) leaseOrNil(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := f.c.Get(t.Context(), key, l); err != nil {
		return nil
	}
	return l
}

// G1 on an idle FencedLease: the Lease is the grant's first record — created here, in
// one write — and the Cold pod follows it at once; the status records the grant with the
// holder's first renewal, in one write, at the grant's time.
func TestAGrantOnAnIdleFencedLeaseIsWrittenOnTheLeaseFirst(t *testing.T) {
	f := newIdleFixture(t, 0)
	statusBefore := f.fl(t).ResourceVersion
	grantedAt := f.clock.Now()
	res := f.reconcileFor(t)
	l := f.leaseOrNil(t)
	if got := leaserecord.Read(l); !got.Shows("a", "uid-a", 1) {
		t.Fatalf("the Lease shows %+v, want a's grant of token 1", got)
	}
	// a is Cold: it starts when its pod is patched, in the pass that wrote the Lease.
	a := f.pod(t, "a")
	if a.Annotations[fencingv1.TokenAnnotation] != "1" || len(a.Spec.SchedulingGates) != 0 || a.Labels[fencingv1.HolderLabel] != "true" {
		t.Fatalf("a's pod right after the Lease write: %v, gates %v", a.Annotations, a.Spec.SchedulingGates)
	}
	if fl := f.fl(t); fl.Status.Holder != nil || fl.ResourceVersion != statusBefore {
		t.Fatalf("the status was written before a's first renewal: %+v", fl.Status)
	}
	f.clock.Step(100 * time.Millisecond)
	f.expectFollowUp(t, res) // the echo: the grant is adopted in memory, nothing written
	if fl := f.fl(t); fl.ResourceVersion != statusBefore {
		t.Fatalf("the status was written in the wait: %+v", fl.Status)
	}

	f.clock.Step(200 * time.Millisecond)
	f.renew(t)
	f.reconcile(t)
	fl := f.fl(t)
	if h := fl.Status.Holder; h == nil || h.PodName != "a" || h.Token != 1 || h.FirstRenewTime == nil ||
		!meta.IsStatusConditionTrue(fl.Status.Conditions, fencingv1.ConditionReady) {
		t.Fatalf("a's grant is not recorded with its first renewal: %+v", fl.Status)
	}
	if !fl.Status.Holder.AcquireTime.Equal(decision.MicroTime(grantedAt)) || fl.Status.FencingToken != 1 || fl.Status.Waiting != 1 {
		t.Fatalf("status %+v: want acquired at the Lease write (%v), token 1, b waiting", fl.Status, grantedAt)
	}
	if writes := rvDistance(t, statusBefore, fl.ResourceVersion); writes != 1 {
		t.Fatalf("the FencedLease was written %d times for the grant and its first renewal, want 1", writes)
	}
	if b := f.pod(t, "b"); b.Annotations[fencingv1.TokenAnnotation] != "" {
		t.Fatalf("b was given token %s", b.Annotations[fencingv1.TokenAnnotation])
	}
}

// A re-created FencedLease continues above its tombstone's token: the grant swaps the
// tombstone (its version read) to name the pod with the next token.
func TestAGrantOnATombstoneContinuesAboveItsToken(t *testing.T) {
	f := newIdleFixture(t, 7)
	before := f.lease(t).ResourceVersion
	f.reconcile(t)
	f.expectGrantOnLeaseInOneWrite(t, before, "a", 8)
	f.pastCoalesce(t)
	if name, token, _ := f.holder(t); name != "a" || token != 8 {
		t.Fatalf("holder %s token %d, want a with 8", name, token)
	}
}

// A grant only the Lease records — this process restarted, or its status write waits —
// is adopted as the Lease has it, never made again: b, next in line, gets nothing, and no
// token is used twice. Without a renewal the status records it when the wait is over
// (HolderStarting); a restarted process, which did not write it, records it at once.
func TestAGrantOnlyTheLeaseRecordsIsAdoptedNeverMadeAgain(t *testing.T) {
	for _, restart := range []bool{false, true} {
		f := newIdleFixture(t, 0)
		f.reconcile(t)
		fl := f.endTheWait(t, restart, "", "a", 1)
		if got := leaserecord.Read(f.lease(t)); !got.Shows("a", "uid-a", 1) {
			t.Fatalf("restart=%v: the Lease shows %+v, want a's grant kept", restart, got)
		}
		if b := f.pod(t, "b"); b.Annotations[fencingv1.TokenAnnotation] != "" || fl.Status.FencingToken != 1 {
			t.Fatalf("restart=%v: b given token %q, status token %d", restart, b.Annotations[fencingv1.TokenAnnotation], fl.Status.FencingToken)
		}
	}
}
