package fencedlease

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/internal/grantorder"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

var key = types.NamespacedName{Namespace: "ns", Name: "invoices"}

func newFL(duration int32) *fencingv1.FencedLease {
	return &fencingv1.FencedLease{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Generation: 1},
		// A startup deadline equal to the duration: tests of startup set their own.
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: duration, StartupDeadlineSeconds: duration,
			RevocationPolicy: fencingv1.DeletePodPolicy},
	}
}

// pod is a candidate as the admission webhook leaves it: labeled, state Waiting, gated.
func pod(name string, created time.Time) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace, Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(created),
			Labels:            map[string]string{fencingv1.LeaseLabel: key.Name},
			Annotations:       map[string]string{fencingv1.StateAnnotation: string(fencingv1.PodWaiting)},
		},
		Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: fencingv1.SchedulingGate}}},
	}
}

// leaseFor is the Lease as grant step G2 writes it (acquireTime the grant's), renewed at
// renew: renew equal to the grant's acquireTime is no renewal yet.
func leaseFor(h *fencingv1.Holder, renew time.Time) *coordinationv1.Lease {
	l := tombstone(h.Token)
	l.Annotations[fencingv1.HolderUIDAnnotation] = string(h.PodUID)
	l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To(h.PodName), AcquireTime: h.AcquireTime.DeepCopy(), RenewTime: decision.MicroTime(renew)}
	return l
}

// tombstone is the operator's Lease with no holder and the high-water token.
func tombstone(token int64) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Namespace: key.Namespace, Name: key.Name,
		Labels:      map[string]string{fencingv1.LeaseLabel: key.Name},
		Annotations: map[string]string{fencingv1.TokenAnnotation: decision.FormatToken(token)},
	}}
}

// step runs one reconcile's observation and decision at the fake clock's time, on a
// fake API server that holds lease and pods (see observeStep).
func step(tr *decision.GrantMemory, c *clocktesting.FakeClock, fl *fencingv1.FencedLease, lease *coordinationv1.Lease, pods []corev1.Pod) decision.Decision {
	return observeStep(tr, c, fl, lease, pods, nil)
}

// stepWithHolder is step with the holder pod as an uncached read finds it: holder is
// in the API server but not among the labeled pods (it lost its label), or nil (gone).
func stepWithHolder(tr *decision.GrantMemory, c *clocktesting.FakeClock, fl *fencingv1.FencedLease, lease *coordinationv1.Lease, pods []corev1.Pod, holder *corev1.Pod) decision.Decision {
	var extra []client.Object
	if holder != nil && decision.FindPod(pods, holder.UID) == nil {
		extra = append(extra, holder.DeepCopy())
	}
	return observeStep(tr, c, fl, lease, pods, extra)
}

func TestFirstCandidateGetsTokenOneFIFO(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	tr := decision.NewGrantMemory(c)
	fl := newFL(10)
	pods := []corev1.Pod{pod("b", t0.Add(time.Second)), pod("c", t0), pod("a", t0.Add(time.Second))}
	d := step(tr, c, fl, nil, pods)
	if d.Granted() == nil || d.Granted().PodName != "c" || d.Granted().Token != 1 {
		t.Fatalf("want c granted token 1 (oldest), got %+v", d.Granted())
	}
	if fl.Status.FencingToken != 1 || fl.Status.Waiting != 2 || fl.Status.Transitions != 1 {
		t.Fatalf("status: %+v", fl.Status)
	}
	// G1 on an idle FencedLease: the Lease first, the status waits for the first renewal.
	if !d.GrantOnLease || d.StatusWait != decision.StatusCoalesce || d.RequeueAfter != decision.StatusCoalesce {
		t.Fatalf("grantOnLease %v, statusWait %v, requeueAfter %v: want the Lease first and the status write to wait %v",
			d.GrantOnLease, d.StatusWait, d.RequeueAfter, decision.StatusCoalesce)
	}
	// Among equal creation times the name decides: a before b.
	pods[1].Status.Phase = corev1.PodSucceeded
	d = step(tr, c, fl, nil, pods)
	if d.Released() == nil || d.Released().Release != fencingv1.ReleasePodFinished || d.Granted() == nil || d.Granted().PodName != "a" || d.Granted().Token != 2 {
		t.Fatalf("want c released (finished) and a granted token 2, got released=%+v granted=%+v", d.Released(), d.Granted())
	}
}

func TestExpiryCountsFromObservedRenewalNotFromTheHolderTimestamp(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	tr := decision.NewGrantMemory(c)
	fl := newFL(10)
	pods := []corev1.Pod{pod("a", t0), pod("b", t0.Add(time.Second))}
	step(tr, c, fl, nil, pods)
	h := fl.Status.Holder.DeepCopy()

	// The holder's RenewTime is written by another machine with a clock an hour behind:
	// only its change matters.
	skewed := t0.Add(-time.Hour)
	c.Step(6 * time.Second)
	d := step(tr, c, fl, leaseFor(h, skewed), pods)
	if d.Revoked() != nil || d.RequeueAfter != 10*time.Second {
		t.Fatalf("renewal seen at +6s must give a full duration: revoked=%v requeue=%v", d.Revoked(), d.RequeueAfter)
	}
	c.Step(9*time.Second + 999*time.Millisecond)
	if d := step(tr, c, fl, leaseFor(h, skewed), pods); d.Revoked() != nil {
		t.Fatalf("revoked 1ms before expiry")
	}
	c.Step(5 * time.Millisecond)
	d = step(tr, c, fl, leaseFor(h, skewed), pods)
	if d.Revoked() == nil || d.Revoked().PodName != "a" || d.Revoked().Token != 1 || d.Revoked().Reason != fencingv1.ReasonLeaseExpired {
		t.Fatalf("want a revoked for expiry, got %+v", d.Revoked())
	}
	if d.RevocationLateness() != 4*time.Millisecond {
		t.Fatalf("lateness = %v, want 4ms", d.RevocationLateness())
	}
	if d.Granted() == nil || d.Granted().PodName != "b" || d.Granted().Token != 2 || fl.Status.Revocations != 1 {
		t.Fatalf("want b granted token 2 in the same decision, got %+v / %+v", d.Granted(), fl.Status)
	}
}

func TestRestartGivesAFullDurationFromFirstLook(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	fl := newFL(10)
	pods := []corev1.Pod{pod("a", t0), pod("b", t0)}
	step(decision.NewGrantMemory(c), c, fl, nil, pods)
	h := fl.Status.Holder.DeepCopy()

	// A new controller (empty tracker) looks 9s after the grant, long after the last renewal.
	c.Step(9 * time.Second)
	fresh := decision.NewGrantMemory(c)
	if d := step(fresh, c, fl, leaseFor(h, t0), pods); d.Revoked() != nil || d.RequeueAfter != 10*time.Second {
		t.Fatalf("after restart: revoked=%v requeue=%v, want a full duration", d.Revoked(), d.RequeueAfter)
	}
	c.Step(10 * time.Second)
	if d := step(fresh, c, fl, leaseFor(h, t0), pods); d.Revoked() == nil {
		t.Fatal("not revoked a full duration after first look")
	}
}

func TestHalfDoneGrantIsFinishedNotRegranted(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	fl := newFL(10)
	pods := []corev1.Pod{pod("a", t0), pod("b", t0)}
	// G1 was written (token 5), the Lease still shows the tombstone of token 4.
	fl.Status.FencingToken = 5
	fl.Status.Holder = &fencingv1.Holder{PodName: "a", PodUID: "uid-a", Token: 5, AcquireTime: *decision.MicroTime(t0)}
	d := step(decision.NewGrantMemory(c), c, fl, tombstone(4), pods)
	if d.Granted() != nil || d.Released() != nil || d.Revoked() != nil {
		t.Fatalf("a half-done grant must be kept: %+v", d)
	}
	if fl.Status.FencingToken != 5 || fl.Status.Holder.Token != 5 {
		t.Fatalf("token changed: %+v", fl.Status)
	}
}

func TestReleaseByLeaseNeedsTheHoldersToken(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	fl := newFL(10)
	pods := []corev1.Pod{pod("a", t0), pod("b", t0.Add(time.Second))}
	tr := decision.NewGrantMemory(c)
	step(tr, c, fl, nil, pods)
	h := fl.Status.Holder.DeepCopy()

	cleared := leaseFor(h, t0)
	cleared.Spec.HolderIdentity = nil
	// Same token, no holder: the holder released.
	d := step(tr, c, fl.DeepCopy(), cleared, pods)
	if d.Released() == nil || d.Released().Release != fencingv1.ReleaseLeaseReleased || d.Granted().Token != 2 {
		t.Fatalf("want release by Lease and token 2, got %+v", d)
	}
	// An older token with no holder is the tombstone of an earlier grant, not a release.
	cleared.Annotations[fencingv1.TokenAnnotation] = "0"
	if d := step(tr, c, fl.DeepCopy(), cleared, pods); d.Released() != nil {
		t.Fatalf("a tombstone taken for a release: %+v", d.Released())
	}
}

func TestTokenAdoptsTheLeaseHighWaterMark(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	fl := newFL(10) // re-created: empty status
	tomb := tombstone(41)
	d := step(decision.NewGrantMemory(c), c, fl, tomb, []corev1.Pod{pod("a", t0)})
	if d.Granted() == nil || d.Granted().Token != 42 {
		t.Fatalf("want token 42 above the tombstone's 41, got %+v", d.Granted())
	}
	d = step(decision.NewGrantMemory(c), c, newFL(10), tomb, nil)
	if d.Status.FencingToken != 41 {
		t.Fatalf("status adopts the tombstone even with nobody to grant: %d", d.Status.FencingToken)
	}
}

func TestSuspendAndDeletion(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	pods := []corev1.Pod{pod("a", t0)}
	fl := newFL(10)
	fl.Spec.Suspend = true
	if d := step(decision.NewGrantMemory(c), c, fl, nil, pods); d.Granted() != nil || fl.Status.Waiting != 1 {
		t.Fatalf("suspended: granted %+v, waiting %d", d.Granted(), fl.Status.Waiting)
	}
	fl.Spec.Suspend = false
	step(decision.NewGrantMemory(c), c, fl, nil, pods)
	fl.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	d := step(decision.NewGrantMemory(c), c, fl, nil, pods)
	if d.Revoked() == nil || d.Revoked().Reason != fencingv1.ReasonFencedLeaseDeleted || d.Granted() != nil {
		t.Fatalf("deleting: want revoke and no grant, got %+v", d)
	}
}

// Checks A1.
func TestCandidatesSkipPodsThatHadAGeneration(t *testing.T) {
	finishedPod := pod("finished", t0)
	finishedPod.Status.Phase = corev1.PodFailed
	terminating := pod("terminating", t0)
	terminating.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	revoked := pod("revoked", t0)
	revoked.Annotations = map[string]string{fencingv1.StateAnnotation: string(fencingv1.PodRevoked), fencingv1.TokenAnnotation: "3"}
	tokened := pod("tokened", t0)
	tokened.Annotations = map[string]string{fencingv1.TokenAnnotation: "2"}
	waiting := pod("waiting", t0)
	got := grantorder.Candidates([]corev1.Pod{finishedPod, terminating, revoked, tokened, waiting}, &fencingv1.FencedLeaseStatus{}, "")
	if len(got) != 1 || got[0].Name != "waiting" {
		t.Fatalf("candidates = %v", got)
	}
}

// Only pods the webhook made candidates are ever granted: a pod labeled after creation
// never went through it (no state, no gate), a pod whose gate is gone may already run,
// and a pod another gate still holds could not start. (A1)
func TestCandidatesAreWaitingAndGated(t *testing.T) {
	labeledLater := pod("labeled-later", t0)
	labeledLater.Annotations = nil
	labeledLater.Spec.SchedulingGates = nil
	ungated := pod("ungated", t0)
	ungated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/other"}}
	released := pod("released", t0)
	released.Annotations[fencingv1.StateAnnotation] = string(fencingv1.PodReleased)
	queued := pod("queued", t0) // a queue's gate is still on it: it could not start yet
	queued.Spec.SchedulingGates = append(queued.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: "example.com/queue"})
	ready := pod("ready", t0.Add(time.Second))
	got := grantorder.Candidates([]corev1.Pod{labeledLater, ungated, released, queued, ready}, &fencingv1.FencedLeaseStatus{}, "")
	if len(got) != 1 || got[0].Name != "ready" {
		t.Fatalf("candidates = %v, want only the Waiting pod held back by our gate alone", got)
	}
	// Once the queue lifts its gate, it is first again (oldest).
	queued.Spec.SchedulingGates = queued.Spec.SchedulingGates[:1]
	if got := grantorder.Candidates([]corev1.Pod{queued, ready}, &fencingv1.FencedLeaseStatus{}, ""); len(got) != 2 || got[0].Name != "queued" {
		t.Fatalf("candidates = %v, want queued first once only our gate is left", got)
	}
}

// After a failover the new leader revokes a full lease after its first look: the
// lateness metric shows that delay, measured from the RenewTime the holder last wrote.
func TestLatenessShowsTheDelayAFailoverAdds(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	fl := newFL(10)
	pods := []corev1.Pod{pod("a", t0), pod("b", t0)}
	old := decision.NewGrantMemory(c)
	step(old, c, fl, nil, pods)
	h := fl.Status.Holder.DeepCopy()
	c.Step(6 * time.Second)
	step(old, c, fl, leaseFor(h, t0.Add(6*time.Second)), pods) // renewal seen at +6s

	c.Step(4 * time.Second) // the leader fails; a new one looks at +10s
	fresh := decision.NewGrantMemory(c)
	step(fresh, c, fl, leaseFor(h, t0.Add(6*time.Second)), pods)
	if got := fl.Status.Holder.LastRenewTime.Time; !got.Equal(t0.Add(6 * time.Second)) {
		t.Fatalf("the new leader's first look moved lastRenewTime to %v", got)
	}
	c.Step(10 * time.Second)
	d := step(fresh, c, fl, leaseFor(h, t0.Add(6*time.Second)), pods)
	if d.Revoked() == nil {
		t.Fatal("not revoked a lease after the new leader's first look")
	}
	if d.RevocationLateness() != 4*time.Second {
		t.Fatalf("lateness = %v, want 4s (revoked at +20s, expired at +16s)", d.RevocationLateness())
	}
}

// grantedToA is a FencedLease of lease 10 s whose first decision, at t0, granted pod a,
// its only candidate; h is that grant.
func grantedToA() (*clocktesting.FakeClock, *decision.GrantMemory, *fencingv1.FencedLease, []corev1.Pod, *fencingv1.Holder) {
	c := clocktesting.NewFakeClock(t0)
	tr := decision.NewGrantMemory(c)
	fl := newFL(10)
	pods := []corev1.Pod{pod("a", t0)}
	step(tr, c, fl, nil, pods)
	return c, tr, fl, pods, fl.Status.Holder.DeepCopy()
}

func TestLastRenewTimeChangesOnlyOnRenewal(t *testing.T) {
	c, tr, fl, pods, h := grantedToA()
	c.Step(6 * time.Second)
	step(tr, c, fl, leaseFor(h, t0.Add(6*time.Second)), pods)
	if got := fl.Status.Holder.LastRenewTime.Time; !got.Equal(t0.Add(6 * time.Second)) {
		t.Fatalf("lastRenewTime = %v, want the observation at +6s", got)
	}
	c.Step(2 * time.Second)
	step(tr, c, fl, leaseFor(h, t0.Add(6*time.Second)), pods)
	if got := fl.Status.Holder.LastRenewTime.Time; !got.Equal(t0.Add(6 * time.Second)) {
		t.Fatalf("lastRenewTime moved without a renewal: %v", got)
	}
}

// A renewal alone costs no status write: after the first (firstRenewTime), lastRenewTime
// moves only with a status write made for another reason, while expiry still counts from
// every renewal observed.
func TestARenewalAloneWritesNoStatus(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	tr := decision.NewGrantMemory(c)
	fl := newFL(10)
	pods := []corev1.Pod{pod("a", t0), pod("b", t0)}
	step(tr, c, fl, nil, pods)
	h := fl.Status.Holder.DeepCopy()
	writes := 0
	for i := 1; i <= 30; i++ { // a renewal every second for 30 s
		c.Step(time.Second)
		before := fl.Status.DeepCopy()
		d := step(tr, c, fl, leaseFor(h, t0.Add(time.Duration(i)*time.Second)), pods)
		if d.Revoked() != nil || d.RequeueAfter != 10*time.Second {
			t.Fatalf("renewal %d: %+v; every renewal must restart the 10 s", i, d)
		}
		if !equality.Semantic.DeepEqual(*before, fl.Status) {
			writes++
		}
	}
	if writes != 1 {
		t.Fatalf("%d status writes for 30 renewals, want 1 (the first renewal)", writes)
	}
	if got := fl.Status.Holder.LastRenewTime.Time; !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("lastRenewTime = %v, want the first renewal's observation", got)
	}

	// A status write for another reason (a pod starts waiting) records the last renewal seen.
	c.Step(time.Second)
	step(tr, c, fl, leaseFor(h, t0.Add(31*time.Second)), append(pods, pod("c", t0)))
	if got := fl.Status.Holder.LastRenewTime.Time; !got.Equal(t0.Add(31 * time.Second)) {
		t.Fatalf("lastRenewTime = %v after a status write with a renewal seen at +31s", got)
	}
}

// The controller's own grant-time write of the Lease (RenewTime = acquireTime) is not a
// renewal: the grant's clock keeps running from the grant, and nothing is recorded.
func TestTheGrantsOwnLeaseWriteIsNotARenewal(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	tr := decision.NewGrantMemory(c)
	fl := newFL(10)
	pods := []corev1.Pod{pod("a", t0), pod("b", t0)}
	step(tr, c, fl, nil, pods)
	h := fl.Status.Holder.DeepCopy()
	before := fl.Status.DeepCopy()
	c.Step(500 * time.Millisecond)
	d := step(tr, c, fl, leaseFor(h, h.AcquireTime.Time), pods) // G2, seen
	if d.RequeueAfter != 9500*time.Millisecond {
		t.Fatalf("requeueAfter = %v, want 9.5s: the clock runs from the grant", d.RequeueAfter)
	}
	if !equality.Semantic.DeepEqual(before.Holder, fl.Status.Holder) {
		t.Fatalf("the grant's own write changed the status: %+v", fl.Status.Holder)
	}
}
