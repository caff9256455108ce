package invariants

import (
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

func lease(name string, token int64, holder string, uid types.UID) coordinationv1.Lease {
	l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels:      map[string]string{fencingv1.LeaseLabel: "fl"},
		Annotations: map[string]string{fencingv1.TokenAnnotation: itoa(token)}}}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
		l.Annotations[fencingv1.HolderUIDAnnotation] = string(uid)
	}
	return l
}

func pod(name string, token int64, state fencingv1.PodState, slot string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
		Labels:      map[string]string{fencingv1.LeaseLabel: "fl"},
		Annotations: map[string]string{fencingv1.StateAnnotation: string(state)}}}
	if token > 0 {
		p.Annotations[fencingv1.TokenAnnotation] = itoa(token)
	}
	if slot != "" {
		p.Annotations[fencingv1.SlotAnnotation] = slot
	}
	return p
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func fl(token int64, holders int32) *fencingv1.FencedLease {
	f := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Name: "fl"}}
	f.Spec.Holders = holders
	f.Status.FencingToken = token
	return f
}

// expect fails unless got holds exactly one violation containing want.
func expect(t *testing.T, got []string, want string) {
	t.Helper()
	if len(got) != 1 || !strings.Contains(got[0], want) {
		t.Fatalf("violations %q, want one saying %q", got, want)
	}
}

// Each invariant reports when it breaks, and a history that keeps them reports nothing.
func TestEachInvariantReportsWhenItBreaks(t *testing.T) {
	clean := func(c *Checker, got []string) {
		t.Helper()
		if len(got) > 0 {
			t.Fatalf("violations in a good history: %q", got)
		}
	}
	t.Run("a Lease's token goes down", func(t *testing.T) {
		c := New("fl")
		clean(c, c.Lease(ptr.To(lease("fl", 3, "a", "uid-a"))))
		expect(t, c.Lease(ptr.To(lease("fl", 2, "a", "uid-a"))), "token went down from 3 to 2")
	})
	t.Run("a Lease of another FencedLease is not judged", func(t *testing.T) {
		c := New("other")
		clean(c, c.Lease(ptr.To(lease("fl", 3, "a", "uid-a"))))
		clean(c, c.Lease(ptr.To(lease("fl", 2, "a", "uid-a"))))
	})
	t.Run("status.fencingToken goes down", func(t *testing.T) {
		c := New("fl")
		clean(c, c.FencedLease(fl(4, 1)))
		expect(t, c.FencedLease(fl(3, 1)), "status.fencingToken went down from 4 to 3")
	})
	t.Run("a pod holds again after its grant ended", func(t *testing.T) {
		c := New("fl")
		clean(c, c.Pods([]corev1.Pod{pod("a", 1, fencingv1.PodRevoked, "")}))
		expect(t, c.Pods([]corev1.Pod{pod("a", 1, fencingv1.PodHolding, "")}), "Holding again after its grant ended")
	})
	t.Run("a pod is granted twice", func(t *testing.T) {
		c := New("fl")
		clean(c, c.Pods([]corev1.Pod{pod("a", 1, fencingv1.PodHolding, "")}))
		expect(t, c.Pods([]corev1.Pod{pod("a", 2, fencingv1.PodHolding, "")}), "granted twice: token 1, then 2")
	})
	t.Run("a token names two pods, on a pod and a Lease", func(t *testing.T) {
		c := New("fl")
		clean(c, c.Pods([]corev1.Pod{pod("a", 1, fencingv1.PodReleased, "")}))
		expect(t, c.Lease(ptr.To(lease("fl", 1, "b", "uid-b"))), "token 1 names two pods")
	})
	t.Run("two pods hold one slot", func(t *testing.T) {
		c := New("fl")
		clean(c, c.FencedLease(fl(2, 3)))
		clean(c, c.Pods([]corev1.Pod{pod("a", 1, fencingv1.PodHolding, "0"), pod("b", 2, fencingv1.PodHolding, "1")}))
		expect(t, c.Pods([]corev1.Pod{pod("a", 1, fencingv1.PodHolding, "1"), pod("b", 2, fencingv1.PodDraining, "1")}), `slot "1"`)
	})
	t.Run("more pods hold than spec.holders ever allowed", func(t *testing.T) {
		c := New("fl")
		clean(c, c.FencedLease(fl(2, 1)))
		expect(t, c.Pods([]corev1.Pod{pod("a", 1, fencingv1.PodHolding, ""), pod("b", 2, fencingv1.PodHolding, "1")}), "more than spec.holders 1")
	})
	t.Run("a pod whose label was taken off is still judged", func(t *testing.T) {
		c := New("fl")
		a := pod("a", 1, fencingv1.PodRevoked, "")
		clean(c, c.Pods([]corev1.Pod{a}))
		delete(a.Labels, fencingv1.LeaseLabel)
		a.Annotations[fencingv1.StateAnnotation] = string(fencingv1.PodHolding)
		expect(t, c.Pods([]corev1.Pod{a}), "again after its grant ended")
	})
	t.Run("the finalizer went while a Lease names a live grant", func(t *testing.T) {
		c := New("fl")
		leases := []coordinationv1.Lease{lease("fl", 1, "a", "uid-a")}
		clean(c, c.Objects(fl(1, 1), leases, []corev1.Pod{pod("a", 1, fencingv1.PodHolding, "")}))
		expect(t, c.Objects(nil, leases, []corev1.Pod{pod("a", 1, fencingv1.PodHolding, "")}), "gone while Lease fl names a")
		ended := New("fl")
		clean(ended, ended.Objects(nil, leases, []corev1.Pod{pod("a", 1, fencingv1.PodRevoked, "")}))
		deleting := pod("a", 1, fencingv1.PodHolding, "")
		deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		gone := New("fl")
		clean(gone, gone.Objects(nil, leases, []corev1.Pod{deleting}))
	})
	t.Run("a resource accepts a lower token", func(t *testing.T) {
		c := New("fl")
		clean(c, c.Accepted("ledger", 2))
		clean(c, c.Accepted("ledger", 2))
		clean(c, c.Accepted("other", 1))
		expect(t, c.Accepted("ledger", 1), "accepted token 1 after token 2")
	})
}
