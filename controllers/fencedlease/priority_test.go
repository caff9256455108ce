package fencedlease

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// P1: the event that only brings back a Lease version the controller's own write made
// queues its FencedLease behind every other; any other event of the same Lease (a
// holder's renewal) keeps the normal priority, and raises a follow-up already queued.
func TestEchoesOfOwnWritesQueueAtFollowUpPriority(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	own := newOwnWrites(clocktesting.NewFakeClock(t0))
	h := echoesFollowUp{handler.EnqueueRequestsFromMapFunc(byLabel), own}
	lease := func(name, rv string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			ResourceVersion: rv, Labels: map[string]string{fencingv1.LeaseLabel: name}}}
	}
	update := func(old, new *coordinationv1.Lease) {
		h.Update(context.Background(), event.UpdateEvent{ObjectOld: old, ObjectNew: new}, q)
	}
	own.made("uid-echo", "8")
	update(lease("echo", "7"), lease("echo", "8"))       // the hand-over's own write
	update(lease("renewed", "3"), lease("renewed", "4")) // a holder's renewal
	own.createdLease(decision.SlotLease{Owner: "uid-fl"}, lease("created", "5"))
	h.Create(context.Background(), event.CreateEvent{Object: lease("created", "5")}, q)

	got := map[string]int{}
	q.Len() // takes the adds in from the queue's buffer
	for range 3 {
		req, priority, _ := q.GetWithPriority()
		got[req.Name] = priority
		q.Done(req)
	}
	want := map[string]int{"renewed": normalPriority, "echo": followUpPriority, "created": followUpPriority}
	for name, p := range want {
		if got[name] != p {
			t.Errorf("%s queued at priority %d, want %d (all: %v)", name, got[name], p, got)
		}
	}

	// A renewal of a Lease whose follow-up waits raises it: the holder rules may have news.
	update(lease("echo", "7"), lease("echo", "8"))
	update(lease("echo", "8"), lease("echo", "9"))
	q.Len()
	if req, priority, _ := q.GetWithPriority(); req.Name != "echo" || priority != normalPriority {
		t.Errorf("after a renewal the follow-up runs at %d, want %d", priority, normalPriority)
	}
}

// The queue order P1 promises: due hand-overs (normal) before any follow-up, whatever the
// order they were added in.
func TestFollowUpsWaitForEveryDueLease(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	for _, name := range []string{"f1", "f2"} {
		q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(followUpPriority)}, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	for _, name := range []string{"d1", "d2"} {
		q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(normalPriority)}, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	q.Len() // takes the adds in from the queue's buffer
	var order []string
	for range 4 {
		req, _, _ := q.GetWithPriority()
		order = append(order, req.Name)
		q.Done(req)
	}
	if order[0][0] != 'd' || order[1][0] != 'd' {
		t.Fatalf("order %v: the due Leases go first", order)
	}
}

// P1 for a Warm standby: it starts on the Lease, so the hand-over's pass writes the Lease
// alone; the follow-up pass demotes a, patches b and deletes a, in that order's result.
func TestAFailoverToAWarmStandbyWritesTheLeaseAloneFirst(t *testing.T) {
	f := newCASFixtureWaiting(t, warmPod("b", t0.Add(time.Second)))
	before := f.lease(t).ResourceVersion
	podsBefore := map[string]string{"a": f.pod(t, "a").ResourceVersion, "b": f.pod(t, "b").ResourceVersion}
	f.clock.Step(11 * time.Second)
	res := f.reconcileFor(t)
	f.expectGrantOnLeaseInOneWrite(t, before, "b", 2)
	for name, rv := range podsBefore {
		if got := f.pod(t, name).ResourceVersion; got != rv {
			t.Fatalf("pod %s was written in the hand-over's pass (version %s, was %s): only the Lease is due first", name, got, rv)
		}
	}
	f.expectFollowUp(t, res)
	if b := f.pod(t, "b"); b.Annotations[fencingv1.TokenAnnotation] != "2" || b.Labels[fencingv1.HolderLabel] != "true" {
		t.Fatalf("b after the follow-up: %v %v, want token 2 and the holder label", b.Annotations, b.Labels)
	}
	if !f.podGone(t, "a") {
		t.Fatal("the follow-up did not delete a's pod (DeletePod)")
	}
}
