package fencedlease

import (
	"context"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// slotLeaseKey is the key of slot i's Lease of the fixture's FencedLease.
func slotLeaseKey(i int32) client.ObjectKey {
	return client.ObjectKey{Namespace: key.Namespace, Name: fencingv1.SlotLeaseName(key.Name, i)}
}

// slotLeaseNaming is slot i's Lease naming grant h, renewed at renew.
func slotLeaseNaming(i int32, h *fencingv1.Holder, renew time.Time) *coordinationv1.Lease {
	l := leaseFor(h, renew)
	l.Name = fencingv1.SlotLeaseName(key.Name, i)
	l.Spec.LeaseDurationSeconds = ptr.To[int32](10)
	if i > 0 {
		l.Labels[fencingv1.SlotLabel] = strconv.Itoa(int(i))
	}
	return l
}

// holdingPod is pod name holding token in slot i.
func holdingPod(name string, token int64, i int32) *corev1.Pod {
	p := pod(name, t0)
	p.Annotations[fencingv1.StateAnnotation] = string(fencingv1.PodHolding)
	p.Annotations[fencingv1.TokenAnnotation] = strconv.FormatInt(token, 10)
	p.Annotations[fencingv1.SlotAnnotation] = strconv.Itoa(int(i))
	p.Spec.SchedulingGates = nil
	return &p
}

// newSlotsFixture is a FencedLease of two slots (10 s lease): a holds slot 0 with token
// 1, c slot 1 with token 2, both renewed at t0; the waiting pods given wait.
func newSlotsFixture(t *testing.T, waiting ...corev1.Pod) *casFixture {
	t.Helper()
	a, c := slotHolder("a", 1, true), slotHolder("c", 2, true)
	a.LeaseDurationSeconds, c.LeaseDurationSeconds = 10, 10
	fl := slotsFL(2, fencingv1.Slot{Slot: 0, Holder: a}, fencingv1.Slot{Slot: 1, Holder: c})
	fl.Finalizers = []string{fencingv1.Finalizer}
	fl.Status.Transitions = 2
	objs := []client.Object{fl, slotLeaseNaming(0, a, t0), slotLeaseNaming(1, c, t0), holdingPod("a", 1, 0), holdingPod("c", 2, 1)}
	for i := range waiting {
		objs = append(objs, &waiting[i])
	}
	f := fixtureOf(objs...)
	f.reconcile(t) // the controller sees both grants at t0
	return f
}

func (f *casFixture) slotLease(t *testing.T, i int32) *coordinationv1.Lease {
	t.Helper()
	return fetch(t, f.c, slotLeaseKey(i), &coordinationv1.Lease{})
}

// renewSlot is slot i's holder renewing.
func (f *casFixture) renewSlot(t *testing.T, i int32) {
	t.Helper()
	l := f.slotLease(t, i)
	leaserecord.Renew(l, f.clock.Now().Add(time.Hour))
	if err := f.c.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}

// Defect 1 of issue 61, with slots: slot 0's silent holder a is handed over on its Lease
// to the Warm standby b; the operator dies before the status records it; b renews and
// releases; the restarted operator finishes a's revocation and never names a again, nor
// grants b twice, while slot 1's holder renews throughout.
func TestASlotHandOverReleasedWhileTheOperatorWasDownStaysHandedOver(t *testing.T) {
	f := newSlotsFixture(t, warmPod("b", t0.Add(time.Second)))
	f.clock.Step(11 * time.Second)
	f.renewSlot(t, 1)
	f.reconcile(t) // slot 0 handed over to b on its Lease; the status waits for b's first renewal
	if got := leaserecord.Read(f.slotLease(t, 0)); !got.Shows("b", "uid-b", 3) {
		t.Fatalf("the hand-over did not reach slot 0's Lease: %+v", got)
	}
	f.restart()
	f.renewSlot(t, 0) // b confirms its grant, then releases it
	l := f.slotLease(t, 0)
	leaserecord.Release(l)
	if err := f.c.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	seen := newLeaseTokenWatch(f.slotLease(t, 0))
	for range 6 {
		f.clock.Step(time.Second)
		f.renewSlot(t, 1)
		f.reconcile(t)
		seen.check(t, f.slotLease(t, 0))
	}
	st := f.fl(t).Status
	s0 := decision.SlotOf(&st, 0)
	if s0.Holder != nil {
		t.Fatalf("slot 0 held by %+v after a's revocation and b's release", s0.Holder)
	}
	if rv := s0.LastRevocation; rv == nil || rv.PodName != "a" || rv.Token != 1 {
		t.Fatalf("slot 0's last revocation %+v, want a's token 1", rv)
	}
	if st.FencingToken != 3 || st.Revocations != 1 {
		t.Fatalf("fencingToken %d revocations %d, want token 3 spent once and one revocation", st.FencingToken, st.Revocations)
	}
	if s1 := decision.SlotOf(&st, 1); s1.Holder == nil || s1.Holder.PodName != "c" {
		t.Fatalf("slot 1 lost its renewing holder: %+v", s1)
	}
	if pb := f.pod(t, "b"); grantorder.PodState(pb) != fencingv1.PodReleased || pb.Annotations[fencingv1.TokenAnnotation] != "3" {
		t.Fatalf("b released token 3, yet its pod shows %s with token %q", grantorder.PodState(pb), pb.Annotations[fencingv1.TokenAnnotation])
	}
}

// Defect 3 of issue 61: a FencedLease with slots is deleted while slot 1's grant is
// recorded only on its Lease (G2, the status write not yet made). Slot 0, judged first,
// must not release the finalizer while that grant stands (D1, N4).
func TestADeletedFencedLeaseKeepsItsFinalizerWhileASlotsGrantIsOnlyOnItsLease(t *testing.T) {
	a := slotHolder("a", 1, true)
	a.LeaseDurationSeconds = 10
	fl := slotsFL(2, fencingv1.Slot{Slot: 0, Holder: a}, fencingv1.Slot{Slot: 1})
	fl.Finalizers = []string{fencingv1.Finalizer}
	fl.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	granted := &fencingv1.Holder{PodName: "b", PodUID: "uid-b", Token: 2, AcquireTime: *decision.MicroTime(t0)}
	b := holdingPod("b", 2, 1)
	f := fixtureOf(fl, slotLeaseNaming(0, a, t0), slotLeaseNaming(1, granted, t0.Add(time.Second)), holdingPod("a", 1, 0), b)
	for range 4 {
		f.clock.Step(100 * time.Millisecond)
		f.reconcile(t)
		got := &fencingv1.FencedLease{}
		err := f.c.Get(context.Background(), key, got)
		if err == nil && controllerHasFinalizer(got) {
			continue
		}
		if rec := leaserecord.Read(f.slotLease(t, 1)); rec.Holder != "" {
			t.Fatalf("the finalizer went while slot 1's Lease names %s with token %d (D1)", rec.Holder, rec.Token)
		}
		return
	}
	t.Fatal("the deleted FencedLease kept its finalizer after every holder was revoked")
}

func controllerHasFinalizer(fl *fencingv1.FencedLease) bool {
	for _, f := range fl.Finalizers {
		if f == fencingv1.Finalizer {
			return true
		}
	}
	return false
}

// Defect 4 of issue 61: a FencedLease with slots says so in its conditions when a slot's
// Lease is not the operator's (LeaseConflict) and when a free slot's next grant waits out
// a lock-delay (RevocationDelayed), as a FencedLease of one grant does.
func TestSlotsReportALeaseConflictAndALockDelay(t *testing.T) {
	t.Run("LeaseConflict", func(t *testing.T) {
		a := slotHolder("a", 1, true)
		a.LeaseDurationSeconds = 10
		fl := slotsFL(2, fencingv1.Slot{Slot: 0, Holder: a}, fencingv1.Slot{Slot: 1})
		fl.Finalizers = []string{fencingv1.Finalizer}
		foreign := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: fencingv1.SlotLeaseName(key.Name, 1)}}
		w := pod("w", t0.Add(time.Second))
		f := fixtureOf(fl, slotLeaseNaming(0, a, t0), foreign, holdingPod("a", 1, 0), &w)
		f.reconcile(t)
		f.reconcile(t)
		st := f.fl(t).Status
		ready := meta.FindStatusCondition(st.Conditions, fencingv1.ConditionReady)
		if ready == nil || ready.Reason != fencingv1.ReasonLeaseConflict || ready.Status != metav1.ConditionFalse {
			t.Fatalf("Ready %+v, want False as LeaseConflict (slot 1's Lease is not the operator's)", ready)
		}
		if decision.SlotOf(&st, 1).Holder != nil {
			t.Fatal("a slot whose Lease is foreign granted someone")
		}
	})
	t.Run("RevocationDelayed", func(t *testing.T) {
		f := newSlotsFixture(t, pod("w", t0.Add(time.Second)))
		f.edit(t, func(fl *fencingv1.FencedLease) { fl.Spec.RevocationDelaySeconds = 30 }, false)
		f.clock.Step(11 * time.Second)
		f.renewSlot(t, 1)
		for range 3 {
			f.reconcile(t)
			f.clock.Step(100 * time.Millisecond)
		}
		st := f.fl(t).Status
		if h := decision.SlotOf(&st, 0).Holder; h != nil {
			t.Fatalf("slot 0 granted %s within its lock-delay", h.PodName)
		}
		ready := meta.FindStatusCondition(st.Conditions, fencingv1.ConditionReady)
		if ready == nil || ready.Reason != fencingv1.ReasonRevocationDelayed {
			t.Fatalf("Ready %+v, want RevocationDelayed while slot 0 waits out its lock-delay", ready)
		}
	})
}
