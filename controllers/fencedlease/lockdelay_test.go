package fencedlease

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	clocktesting "k8s.io/utils/clock/testing"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// expireHolder grants a (10 s lease) with b waiting and lets a's lease run out, on the fake
// clock; it returns the decision that revoked a.
func expireHolder(t *testing.T, tr *decision.GrantMemory, c *clocktesting.FakeClock, fl *fencingv1.FencedLease, pods []corev1.Pod) decision.Decision {
	t.Helper()
	step(tr, c, fl, nil, pods)
	h := fl.Status.Holder.DeepCopy()
	c.Step(time.Second)
	step(tr, c, fl, leaseFor(h, t0.Add(time.Second)), pods) // first renewal
	c.Step(10 * time.Second)
	d := step(tr, c, fl, leaseFor(h, t0.Add(time.Second)), pods)
	if rv := d.Revoked(); rv == nil || rv.Reason != fencingv1.ReasonLeaseExpired {
		t.Fatalf("want a revoked LeaseExpired, got %+v", d.Revoked())
	}
	return d
}

// X8: after an involuntary revocation the next grant waits spec.revocationDelaySeconds,
// frozen into the revocation, on the controller's clock; status and Held say so.
func TestTheNextGrantWaitsOutTheLockDelay(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	tr := decision.NewGrantMemory(c)
	fl := newFL(10)
	fl.Spec.RevocationDelaySeconds = 5
	pods := []corev1.Pod{pod("a", t0), pod("b", t0.Add(time.Second))}
	d := expireHolder(t, tr, c, fl, pods)
	revokedAt := c.Now()
	rv := fl.Status.LastRevocation
	if d.Granted() != nil || rv.DelaySeconds != 5 || rv.NextGrantTime == nil || !rv.NextGrantTime.Time.Equal(revokedAt.Add(5*time.Second)) {
		t.Fatalf("granted %+v in the revoking decision, or the delay not frozen: %+v", d.Granted(), rv)
	}
	if d.RequeueAfter != 5*time.Second {
		t.Fatalf("requeueAfter %v, want the delay", d.RequeueAfter)
	}
	held := meta.FindStatusCondition(fl.Status.Conditions, fencingv1.ConditionHeld)
	if held.Reason != fencingv1.ReasonRevocationDelayed {
		t.Fatalf("Held %s: %s, want %s", held.Reason, held.Message, fencingv1.ReasonRevocationDelayed)
	}

	fl.Spec.RevocationDelaySeconds = 60 // a change applies from the next revocation on
	c.Step(4*time.Second + 999*time.Millisecond)
	if d := step(tr, c, fl, tombstone(1), pods); d.Granted() != nil || d.RequeueAfter != time.Millisecond {
		t.Fatalf("granted 1 ms before the delay ended (requeue %v)", d.RequeueAfter)
	}
	c.Step(time.Millisecond)
	if d := step(tr, c, fl, tombstone(1), pods); d.Granted() == nil || d.Granted().PodName != "b" || d.Granted().Token != 2 {
		t.Fatalf("want b granted token 2 once the delay ended, got %+v", d.Granted())
	}
}

// A new process (a restart, a new leader) gives the whole delay again from its first look,
// as it gives a holder a whole lease: it never trusts another machine's clock.
func TestALockDelayCountsFromTheFirstLookAfterARestart(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	fl := newFL(10)
	fl.Spec.RevocationDelaySeconds = 5
	pods := []corev1.Pod{pod("a", t0), pod("b", t0.Add(time.Second))}
	expireHolder(t, decision.NewGrantMemory(c), c, fl, pods)
	c.Step(4 * time.Second)
	restarted := decision.NewGrantMemory(c)
	if d := step(restarted, c, fl, tombstone(1), pods); d.Granted() != nil || d.RequeueAfter != 5*time.Second {
		t.Fatalf("a restarted controller granted %+v / requeue %v, want the whole delay", d.Granted(), d.RequeueAfter)
	}
	c.Step(5 * time.Second)
	if d := step(restarted, c, fl, tombstone(1), pods); d.Granted() == nil {
		t.Fatal("not granted after the whole delay")
	}
}

// No delay after a release, after a pod that could not start, or with the default 0.
func TestNoLockDelayWhereNoHolderCanStillBeActing(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	tr := decision.NewGrantMemory(c)
	fl := newFL(10)
	fl.Spec.RevocationDelaySeconds = 30
	pods := []corev1.Pod{pod("a", t0), pod("b", t0.Add(time.Second)), pod("c", t0.Add(2*time.Second))}
	step(tr, c, fl, nil, pods)
	pods[0].Status.Phase = corev1.PodSucceeded
	if d := step(tr, c, fl, nil, pods); d.Released() == nil || d.Granted() == nil || d.Granted().PodName != "b" {
		t.Fatalf("a release must grant at once: released %+v granted %+v", d.Released(), d.Granted())
	}
	pods[1].Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "work",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
	d := step(tr, c, fl, leaseFor(fl.Status.Holder, fl.Status.Holder.AcquireTime.Time), pods)
	if rv := d.Revoked(); rv == nil || rv.Reason != fencingv1.ReasonPodCannotStart || rv.DelaySeconds != 0 || d.Granted() == nil || d.Granted().PodName != "c" {
		t.Fatalf("a pod that never started needs no delay: revoked %+v granted %+v", d.Revoked(), d.Granted())
	}
	fl2 := newFL(10)
	if d := expireHolder(t, decision.NewGrantMemory(c), c, fl2, []corev1.Pod{pod("a", t0), pod("b", t0)}); d.Granted() == nil || fl2.Status.LastRevocation.DelaySeconds != 0 {
		t.Fatalf("without a delay the next is granted in the revoking decision: %+v", d.Granted())
	}
}
