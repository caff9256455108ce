package fencedlease

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// Found by test/workloads (a StatefulSet with Ordinal slots rolled to a new revision):
// slot 0's holder a is deleted, and its release is recorded; the Lease of slot 0 still
// names a's grant when the next pass looks (its vacating write did not land, or the cache
// has not shown it yet). That grant is recorded already and ended: it must not be adopted
// and recorded a second time (a second "granted token 1" and one transition too many).
func TestASlotsReleasedGrantIsNotAdoptedAgain(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "same process", true: "after a restart"}[restart], func(t *testing.T) {
			f := newSlotsFixture(t)
			before := f.slotLease(t, 0).DeepCopy()
			if err := f.c.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: "a"}}); err != nil {
				t.Fatal(err)
			}
			f.clock.Step(time.Second)
			f.reconcile(t) // a's release recorded
			fl := f.fl(t)
			if h := decision.SlotOf(&fl.Status, 0).Holder; h != nil {
				t.Fatalf("slot 0 still held after its pod was deleted: %+v", h)
			}
			transitions := fl.Status.Transitions
			// The Lease as it was before the release: still naming a's grant.
			l := f.slotLease(t, 0)
			before.ResourceVersion = l.ResourceVersion
			if err := f.c.Update(context.Background(), before); err != nil {
				t.Fatal(err)
			}
			if !leaserecord.Read(f.slotLease(t, 0)).Shows("a", "uid-a", 1) {
				t.Fatal("the fixture's Lease does not name a's grant")
			}
			if restart {
				f.restart()
			}
			for range 3 {
				f.clock.Step(700 * time.Millisecond)
				f.reconcile(t)
				fl = f.fl(t)
				if h := decision.SlotOf(&fl.Status, 0).Holder; h != nil {
					t.Fatalf("slot 0's released grant was recorded again: %+v", h)
				}
				if fl.Status.Transitions != transitions {
					t.Fatalf("transitions went from %d to %d with no new grant", transitions, fl.Status.Transitions)
				}
			}
			// The StatefulSet's new pod of the same name: granted the next token, once.
			next := pod("a", f.clock.Now())
			next.UID = "uid-a2"
			if err := f.c.Create(context.Background(), &next); err != nil {
				t.Fatal(err)
			}
			for range 4 {
				f.clock.Step(700 * time.Millisecond)
				f.reconcile(t)
			}
			fl = f.fl(t)
			if h := decision.SlotOf(&fl.Status, 0).Holder; h == nil || h.PodUID != "uid-a2" || h.Token != 3 {
				t.Fatalf("slot 0 is held by %+v, want a's new pod with token 3", h)
			}
			if fl.Status.Transitions != fl.Status.FencingToken || fl.Status.FencingToken != 3 {
				t.Fatalf("after the next grant: fencingToken %d, transitions %d, want 3 and 3", fl.Status.FencingToken, fl.Status.Transitions)
			}
		})
	}
}
