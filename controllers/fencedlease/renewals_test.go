package fencedlease

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// renewedLease is the Lease of grant (a-uid, token) renewed at renew seconds after t0.
func renewedLease(token string, renew int) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "invoices", ResourceVersion: "1",
			Labels:      map[string]string{fencingv1.LeaseLabel: "invoices"},
			Annotations: map[string]string{fencingv1.TokenAnnotation: token, fencingv1.HolderUIDAnnotation: "a-uid"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To[int32](5),
			AcquireTime: &metav1.MicroTime{Time: t0}, RenewTime: &metav1.MicroTime{Time: t0.Add(time.Duration(renew) * time.Second)}},
	}
}

// R2: a settled grant's renewal is recorded as its event arrives, on this process's clock,
// and queues nothing; every other Lease event queues a pass and records nothing.
func TestSettledGrantsRenewalIsObservedOnItsEvent(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	tracker := decision.NewGrantMemory(clk)
	key := decision.SlotKey{Lease: types.NamespacedName{Namespace: "ns", Name: "invoices"}}
	h := observeRenewals{handler.EnqueueRequestsFromMapFunc(byLabel), tracker}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	update := func(old, new *coordinationv1.Lease) (queued bool) {
		t.Helper()
		h.Update(context.Background(), event.UpdateEvent{ObjectOld: old, ObjectNew: new}, q)
		if q.Len() == 0 {
			return false
		}
		item, _ := q.Get()
		q.Done(item)
		q.Forget(item)
		return true
	}

	// pass is a pass's look at grant (a-uid, 7) on the Lease renewed at renew seconds,
	// remembered as that pass ends: settled or not, asked to hand off or not.
	pass := func(renew int, settled, handoff bool) decision.Renewal {
		t.Helper()
		c := tracker.Read(key)
		g := c.Of("a-uid", 7)
		g.Renewal = g.Observe(renewedLease("7", renew).Spec.RenewTime, clk.Now())
		g.Settled, g.HandoffSince = settled, time.Time{}
		if handoff {
			g.HandoffSince = clk.Now()
		}
		tracker.Write(key, decision.Recall{g.Key(): g})
		return g.Renewal
	}

	pass(1, false, false)
	clk.Step(time.Second)
	if !update(renewedLease("7", 1), renewedLease("7", 2)) {
		t.Fatal("a renewal of a grant no pass has settled queued nothing")
	}
	if got := tracker.Read(key).Of("a-uid", 7).ObservedAt; !got.Equal(t0) {
		t.Fatalf("an unsettled grant's renewal was recorded on its event (observed at %v)", got)
	}

	pass(1, true, false)
	clk.Step(time.Second)
	if update(renewedLease("7", 1), renewedLease("7", 3)) {
		t.Fatal("a settled grant's renewal queued a pass")
	}
	r := tracker.Read(key).Of("a-uid", 7).Renewal
	if want := t0.Add(2 * time.Second); !r.ObservedAt.Equal(want) || !r.SeenRenewing {
		t.Fatalf("the renewal observed at %v (seen renewing %v), want %v on this clock", r.ObservedAt, r.SeenRenewing, want)
	}

	clk.Step(time.Second)
	successor := renewedLease("7", 4)
	successor.Annotations[fencingv1.SuccessorAnnotation] = "b"
	released := renewedLease("7", 3)
	released.Spec.HolderIdentity = nil
	for name, next := range map[string]*coordinationv1.Lease{
		"another grant's renewal":      renewedLease("8", 4),
		"a renewal with an annotation": successor,
		"a release":                    released,
		"no renewal (a resync)":        renewedLease("7", 3),
	} {
		if !update(renewedLease("7", 3), next) {
			t.Errorf("%s queued nothing", name)
		}
	}
	if r := tracker.Read(key).Of("a-uid", 7); !r.ObservedAt.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("an event that was no settled renewal was recorded as one (observed at %v)", r.ObservedAt)
	}

	pass(3, false, false) // a pass decided other than to keep it
	if !update(renewedLease("7", 3), renewedLease("7", 5)) {
		t.Error("a renewal after a pass unsettled the grant queued nothing")
	}
	pass(5, true, true)
	if !update(renewedLease("7", 5), renewedLease("7", 6)) {
		t.Error("a renewal of a grant asked to hand off queued nothing")
	}
}

// A pass writes back what it read, and a renewal its Lease event recorded meanwhile
// (RenewedOnEvent) is newer than the pass's own look: the write keeps the event's.
func TestGrantMemoryKeepsARenewalRecordedDuringAPass(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	m := decision.NewGrantMemory(clk)
	key := decision.SlotKey{Lease: types.NamespacedName{Namespace: "ns", Name: "invoices"}}
	g := decision.Recall{}.Of("a-uid", 7)
	g.Renewal, g.Settled = g.Observe(renewedLease("7", 1).Spec.RenewTime, clk.Now()), true
	m.Write(key, decision.Recall{g.Key(): g})

	seen := m.Read(key) // a pass begins
	clk.Step(time.Second)
	if !m.RenewedOnEvent(key, "a-uid", 7, renewedLease("7", 2).Spec.RenewTime) {
		t.Fatal("a settled grant's renewal was not recorded on its event")
	}
	m.Write(key, seen) // the pass ends, with what it read
	if got := m.Read(key).Of("a-uid", 7); !got.ObservedAt.Equal(t0.Add(time.Second)) || !got.SeenRenewing {
		t.Fatalf("the pass's write lost the renewal its event recorded: observed at %v", got.ObservedAt)
	}
}

// Only RenewTime may differ for an update to count as a renewal alone.
func TestRenewalOnly(t *testing.T) {
	before := renewedLease("7", 1)
	for name, tc := range map[string]struct {
		change func(*coordinationv1.Lease)
		want   bool
	}{
		"renewTime":            {func(l *coordinationv1.Lease) { l.Spec.RenewTime = &metav1.MicroTime{Time: t0.Add(2 * time.Second)} }, true},
		"nothing":              {func(*coordinationv1.Lease) {}, false},
		"the holder":           {func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("b") }, false},
		"the duration":         {func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To[int32](6) }, false},
		"the token annotation": {func(l *coordinationv1.Lease) { l.Annotations[fencingv1.TokenAnnotation] = "8" }, false},
		"a label":              {func(l *coordinationv1.Lease) { l.Labels["x"] = "y" }, false},
		"renewTime cleared":    {func(l *coordinationv1.Lease) { l.Spec.RenewTime = nil }, false},
		"renewTime and the transitions": {func(l *coordinationv1.Lease) {
			l.Spec.RenewTime = &metav1.MicroTime{Time: t0.Add(2 * time.Second)}
			l.Spec.LeaseTransitions = ptr.To[int32](3)
		}, false},
		"renewTime while deleted": {func(l *coordinationv1.Lease) {
			l.Spec.RenewTime = &metav1.MicroTime{Time: t0.Add(2 * time.Second)}
			l.DeletionTimestamp = &metav1.Time{Time: t0}
		}, false},
	} {
		after := before.DeepCopy()
		tc.change(after)
		if got := renewalOnly(before, after); got != tc.want {
			t.Errorf("%s changed: renewalOnly = %v, want %v", name, got, tc.want)
		}
	}
}

// A pass settles a grant only when it keeps it with nothing waiting for a renewal.
func TestSettled(t *testing.T) {
	fl := func() *fencingv1.FencedLease {
		return &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "invoices"}}
	}
	keeping := func() decision.Decision {
		first := metav1.NewMicroTime(t0)
		return decision.Decision{End: &decision.Transition{Kind: decision.Keep}, RequeueAfter: time.Second,
			Status: fencingv1.FencedLeaseStatus{Holder: &fencingv1.Holder{PodName: "a", PodUID: "a-uid", Token: 7, FirstRenewTime: &first}}}
	}
	if !decision.GrantSettles(fl(), keeping()) {
		t.Fatal("a kept grant that renewed is not settled")
	}
	for name, change := range map[string]func(*fencingv1.FencedLease, *decision.Decision){
		"not yet renewed":  func(_ *fencingv1.FencedLease, d *decision.Decision) { d.Status.Holder.FirstRenewTime = nil },
		"its status waits": func(_ *fencingv1.FencedLease, d *decision.Decision) { d.StatusWait = time.Second },
		"asked to hand off": func(_ *fencingv1.FencedLease, d *decision.Decision) {
			d.Status.Holder.Handoff = &fencingv1.Handoff{SuccessorName: "b"}
		},
		"cut off": func(_ *fencingv1.FencedLease, d *decision.Decision) { d.End.Kind = decision.CutOff },
		"a grant in this pass": func(_ *fencingv1.FencedLease, d *decision.Decision) {
			d.Grant = &decision.Transition{Kind: decision.Grant}
		},
		"no timer": func(_ *fencingv1.FencedLease, d *decision.Decision) { d.RequeueAfter = 0 },
		"being deleted": func(f *fencingv1.FencedLease, _ *decision.Decision) {
			f.DeletionTimestamp = &metav1.Time{Time: t0}
		},
		"revoke requested": func(f *fencingv1.FencedLease, _ *decision.Decision) {
			f.Annotations = map[string]string{fencingv1.RevokeAnnotation: "7"}
		},
	} {
		f, d := fl(), keeping()
		change(f, &d)
		if decision.GrantSettles(f, d) {
			t.Errorf("%s: settled", name)
		}
	}
}
