package fencedlease

import (
	"math"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

func heldReason(st fencingv1.FencedLeaseStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, fencingv1.ConditionHeld); c != nil {
		return c.Reason
	}
	return ""
}

// A holder that vanished from the labeled list but still exists (read uncached) lost its
// label: it may still run, so it is revoked, never released as if deleted.
func TestUnlabeledHolderIsRevokedNotReleased(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	tr := decision.NewGrantMemory(c)
	fl := newFL(10)
	pods := []corev1.Pod{pod("a", t0), pod("b", t0.Add(time.Second))}
	step(tr, c, fl, nil, pods)
	h := fl.Status.Holder.DeepCopy()

	unlabeled := pods[0].DeepCopy()
	delete(unlabeled.Labels, fencingv1.LeaseLabel)
	d := stepWithHolder(tr, c, fl.DeepCopy(), leaseFor(h, t0), pods[1:], unlabeled)
	if d.Released() != nil || d.Revoked() == nil || d.Revoked().Reason != fencingv1.ReasonLabelRemoved || d.Revoked().PodName != "a" {
		t.Fatalf("want a revoked (LabelRemoved), got released=%+v revoked=%+v", d.Released(), d.Revoked())
	}
	if d.Granted() == nil || d.Granted().PodName != "b" || d.Granted().Token != 2 {
		t.Fatalf("want b granted token 2, got %+v", d.Granted())
	}

	relabeled := pods[0].DeepCopy()
	relabeled.Labels[fencingv1.LeaseLabel] = "another-lease"
	if d := stepWithHolder(tr, c, fl.DeepCopy(), leaseFor(h, t0), pods[1:], relabeled); d.Revoked() == nil || d.Revoked().Reason != fencingv1.ReasonLabelRemoved {
		t.Fatalf("a holder relabeled to another FencedLease must be revoked here, got %+v", d.Revoked())
	}
	// Really gone: a release.
	if d := stepWithHolder(tr, c, fl.DeepCopy(), leaseFor(h, t0), pods[1:], nil); d.Released() == nil || d.Released().Release != fencingv1.ReleasePodDeleted {
		t.Fatalf("a holder that is gone is released, got %+v", d)
	}
}

// A Lease of the FencedLease's name that the operator did not create (no lease label):
// never adopted, whatever token it carries, and nothing is granted.
func TestForeignLeaseIsNeverAdopted(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	for name, foreign := range map[string]*coordinationv1.Lease{
		"a client-go leader election Lease": {
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("controller-0")},
		},
		"a forged tombstone at the int64 limit": {ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Annotations: map[string]string{fencingv1.TokenAnnotation: decision.FormatToken(math.MaxInt64)}}},
		"labeled for another FencedLease": {ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{fencingv1.LeaseLabel: "other"}, Annotations: map[string]string{fencingv1.TokenAnnotation: "99"}}},
	} {
		t.Run(name, func(t *testing.T) {
			fl := newFL(10)
			fl.Status.FencingToken = 3
			d := step(decision.NewGrantMemory(c), c, fl, foreign, []corev1.Pod{pod("a", t0)})
			if d.Granted() != nil || d.Status.FencingToken != 3 {
				t.Fatalf("adopted a foreign Lease: granted=%+v token=%d", d.Granted(), d.Status.FencingToken)
			}
			if heldReason(d.Status) != fencingv1.ReasonLeaseConflict || d.RequeueAfter != decision.ConflictRecheck {
				t.Fatalf("Held reason %q requeue %v, want LeaseConflict and a recheck (its deletion brings no event)", heldReason(d.Status), d.RequeueAfter)
			}
		})
	}
	// Deletion is never blocked by it: the holder is revoked.
	fl := newFL(10)
	pods := []corev1.Pod{pod("a", t0)}
	step(decision.NewGrantMemory(c), c, fl, nil, pods)
	fl.DeletionTimestamp = &metav1.Time{Time: t0}
	foreign := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if d := step(decision.NewGrantMemory(c), c, fl, foreign, pods); d.Revoked() == nil || d.Revoked().Reason != fencingv1.ReasonFencedLeaseDeleted {
		t.Fatalf("deleting with a foreign Lease: want the holder revoked, got %+v", d.Revoked())
	}
}

// No token ever wraps: at the int64 limit nothing is granted and Held says why.
func TestTokensNeverWrap(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	tr := decision.NewGrantMemory(c)
	fl := newFL(10)
	fl.Spec.MinFencingToken = math.MaxInt64 - 1
	pods := []corev1.Pod{pod("a", t0), pod("b", t0.Add(time.Second))}
	d := step(tr, c, fl, nil, pods)
	if d.Granted() == nil || d.Granted().Token != math.MaxInt64 {
		t.Fatalf("want the last token granted, got %+v", d.Granted())
	}
	pods[0].Status.Phase = corev1.PodSucceeded
	d = step(tr, c, fl, leaseFor(d.Granted(), t0), pods)
	if d.Released() == nil || d.Granted() != nil || d.Status.FencingToken != math.MaxInt64 {
		t.Fatalf("want a release and no grant past the limit, got %+v", d)
	}
	if heldReason(d.Status) != fencingv1.ReasonTokensExhausted || d.Status.Waiting != 1 {
		t.Fatalf("Held %q waiting %d, want TokensExhausted and b waiting", heldReason(d.Status), d.Status.Waiting)
	}
}

// spec.minFencingToken raises the floor at once; a lower one changes nothing.
func TestMinFencingTokenRaisesTheFloor(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	fl := newFL(10)
	fl.Spec.MinFencingToken = 100
	d := step(decision.NewGrantMemory(c), c, fl, tombstone(7), nil)
	if d.Status.FencingToken != 100 {
		t.Fatalf("fencingToken %d, want the floor 100 at once (so the Lease tombstone keeps it)", d.Status.FencingToken)
	}
	if d := step(decision.NewGrantMemory(c), c, fl, tombstone(7), []corev1.Pod{pod("a", t0)}); d.Granted() == nil || d.Granted().Token != 101 {
		t.Fatalf("want token 101 above the floor, got %+v", d.Granted())
	}
	low := newFL(10)
	low.Spec.MinFencingToken = 3
	if d := step(decision.NewGrantMemory(c), c, low, tombstone(41), []corev1.Pod{pod("a", t0)}); d.Granted() == nil || d.Granted().Token != 42 {
		t.Fatalf("a floor below the tombstone changes nothing: got %+v", d.Granted())
	}
}

// Raising spec.minFencingToken while a pod holds applies from the next grant: the holder
// keeps its token, on the Lease too — its library stops on a token that is not its own,
// and it was revoked a lease later as LeaseExpired — and the next grant is above the
// floor, or none at the int64 limit.
func TestMinFencingTokenRaisedMidGrantAppliesFromTheNextGrant(t *testing.T) {
	for _, floor := range []int64{100, math.MaxInt64} {
		c := clocktesting.NewFakeClock(t0)
		tr := decision.NewGrantMemory(c)
		fl := newFL(10)
		pods := []corev1.Pod{pod("a", t0), pod("b", t0.Add(time.Second))}
		h := step(tr, c, fl, nil, pods).Granted()
		fl.Spec.MinFencingToken = floor
		for range 3 { // three leases of renewals
			c.Step(5 * time.Second)
			d := step(tr, c, fl, leaseFor(h, c.Now()), pods)
			if d.Revoked() != nil || d.Status.Holder == nil || d.Status.Holder.Token != 1 || d.Status.FencingToken != 1 {
				t.Fatalf("floor %d: the holder must keep token 1 while it renews: %+v", floor, d.Status)
			}
			if l := decision.LeaseShowing(fl, decision.SlotFrame{}, &d.Status, leaseFor(h, c.Now()), decision.Renewal{}); decision.ParseToken(l.Annotations) != 1 {
				t.Fatalf("floor %d: the Lease must keep its holder's token 1, it would show %d", floor, decision.ParseToken(l.Annotations))
			}
		}
		pods[0].Status.Phase = corev1.PodSucceeded
		d := step(tr, c, fl, leaseFor(h, c.Now()), pods)
		switch {
		case d.Released() == nil:
			t.Fatalf("floor %d: want a's release, got %+v", floor, d)
		case floor < math.MaxInt64 && (d.Granted() == nil || d.Granted().Token != floor+1):
			t.Fatalf("floor %d: want b granted token %d, got %+v", floor, floor+1, d.Granted())
		case floor == math.MaxInt64 && (d.Granted() != nil || heldReason(d.Status) != fencingv1.ReasonTokensExhausted):
			t.Fatalf("at the int64 limit: want no grant and TokensExhausted, got %+v", d.Status)
		}
	}
}

// Changing spec.leaseDurationSeconds mid-grant does not cut a holder short: the duration
// is frozen per grant; the new one applies from the next grant.
func TestDurationIsFrozenPerGrant(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	tr := decision.NewGrantMemory(c)
	fl := newFL(9)
	pods := []corev1.Pod{pod("a", t0), pod("b", t0.Add(time.Second))}
	d := step(tr, c, fl, nil, pods)
	if d.Granted().LeaseDurationSeconds != 9 {
		t.Fatalf("grant froze %ds, want 9", d.Granted().LeaseDurationSeconds)
	}
	h := fl.Status.Holder.DeepCopy()
	step(tr, c, fl, leaseFor(h, t0), pods) // G2 seen at once; no renewal after it
	fl.Spec.LeaseDurationSeconds = 1
	c.Step(8 * time.Second)
	if d := step(tr, c, fl, leaseFor(h, t0), pods); d.Revoked() != nil || d.RequeueAfter != time.Second {
		t.Fatalf("revoked under the new 1s duration: revoked=%+v requeue=%v", d.Revoked(), d.RequeueAfter)
	}
	c.Step(time.Second)
	d = step(tr, c, fl, leaseFor(h, t0), pods)
	if d.Revoked() == nil || d.Granted() == nil || d.Granted().LeaseDurationSeconds != 1 {
		t.Fatalf("want a revoked at 9s and b granted with the new 1s, got %+v", d)
	}
}

// A revocation whose Lease write landed but whose status write did not (a crash in
// between) is finished as a revocation, never mistaken for the holder's release.
func TestHalfDoneRevocationIsFinished(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	tr := decision.NewGrantMemory(c)
	fl := newFL(10)
	pods := []corev1.Pod{pod("a", t0), pod("b", t0.Add(time.Second))}
	step(tr, c, fl, nil, pods)
	h := fl.Status.Holder.DeepCopy()

	for renewTime, reason := range map[time.Time]fencingv1.RevocationReason{
		t0.Add(time.Second): fencingv1.ReasonLeaseExpired,            // it had renewed
		t0:                  fencingv1.ReasonStartupDeadlineExceeded, // it never renewed
	} {
		revokedByOperator := leaseFor(h, renewTime)
		revokedByOperator.Spec.HolderIdentity = nil
		delete(revokedByOperator.Annotations, fencingv1.HolderUIDAnnotation)
		d := step(tr, c, fl.DeepCopy(), revokedByOperator, pods)
		if d.Released() != nil || d.Revoked() == nil || d.Revoked().Reason != reason || d.Granted().Token != 2 {
			t.Fatalf("want the revocation finished (%s) and token 2 granted, got %+v", reason, d)
		}
	}
	// The holder's own release keeps the UID (the policy forbids it to remove it).
	releasedByHolder := leaseFor(h, t0)
	releasedByHolder.Spec.HolderIdentity = nil
	if d := step(tr, c, fl.DeepCopy(), releasedByHolder, pods); d.Revoked() != nil || d.Released() == nil {
		t.Fatalf("a holder's release taken for a revocation: %+v", d)
	}
}

// A grant that has not renewed yet is starting: the startup deadline bounds it, not the
// lease duration, so a slow image pull is not taken for a dead holder. From the first
// observed renewal on, the lease duration applies. Each is frozen at grant.
func TestStartupDeadlineUntilTheFirstRenewal(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	tr := decision.NewGrantMemory(c)
	fl := newFL(2)
	fl.Spec.StartupDeadlineSeconds = 60
	pods := []corev1.Pod{pod("a", t0), pod("b", t0.Add(time.Second))}
	d := step(tr, c, fl, nil, pods)
	// The status write waits half the 2 s lease for the first renewal (G1 on the Lease).
	if d.Granted().StartupDeadlineSeconds != 60 || d.RequeueAfter != time.Second {
		t.Fatalf("grant froze %ds, requeue %v; want 60s, and 1 s for the status write", d.Granted().StartupDeadlineSeconds, d.RequeueAfter)
	}
	h := fl.Status.Holder.DeepCopy()
	fl.Spec.StartupDeadlineSeconds = 1 // a change applies from the next grant
	c.Step(30 * time.Second)
	d = step(tr, c, fl, leaseFor(h, t0), pods) // G2 seen; no renewal yet
	if d.Revoked() != nil || fl.Status.Holder.FirstRenewTime != nil {
		t.Fatalf("a starting holder revoked after 30s, or taken for started: %+v", d)
	}
	if !strings.Contains(fl.Status.Conditions[0].Message, "starting") {
		t.Fatalf("Held does not say the grant is starting: %q", fl.Status.Conditions[0].Message)
	}

	// Its first renewal at +40s: from then on the 2s lease.
	c.Step(10 * time.Second)
	d = step(tr, c, fl, leaseFor(h, t0.Add(40*time.Second)), pods)
	if d.Revoked() != nil || d.RequeueAfter != 2*time.Second || fl.Status.Holder.FirstRenewTime == nil ||
		!fl.Status.Holder.FirstRenewTime.Time.Equal(t0.Add(40*time.Second)) {
		t.Fatalf("after the first renewal: %+v, firstRenewTime %v", d, fl.Status.Holder.FirstRenewTime)
	}
	if strings.Contains(fl.Status.Conditions[0].Message, "starting") {
		t.Fatalf("Held still says starting: %q", fl.Status.Conditions[0].Message)
	}
	c.Step(2*time.Second + time.Millisecond)
	d = step(tr, c, fl, leaseFor(h, t0.Add(40*time.Second)), pods)
	if d.Revoked() == nil || d.Revoked().Reason != fencingv1.ReasonLeaseExpired {
		t.Fatalf("want LeaseExpired 2s after the last renewal, got %+v", d.Revoked())
	}
	if d.Granted() == nil || d.Granted().StartupDeadlineSeconds != 1 {
		t.Fatalf("the next grant takes the new startup deadline: %+v", d.Granted())
	}
}

// A holder that never renews is revoked at the startup deadline, with its own reason;
// after a controller restart it gets a full startup deadline again.
func TestNeverRenewedIsRevokedAtTheStartupDeadline(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	fl := newFL(2)
	fl.Spec.StartupDeadlineSeconds = 60
	pods := []corev1.Pod{pod("a", t0), pod("b", t0.Add(time.Second))}
	step(decision.NewGrantMemory(c), c, fl, nil, pods)
	h := fl.Status.Holder.DeepCopy()

	c.Step(50 * time.Second)
	restarted := decision.NewGrantMemory(c)
	if d := step(restarted, c, fl, leaseFor(h, t0), pods); d.Revoked() != nil || d.RequeueAfter != 60*time.Second {
		t.Fatalf("after a restart: %+v, want a full startup deadline", d)
	}
	c.Step(60*time.Second + time.Millisecond)
	d := step(restarted, c, fl, leaseFor(h, t0), pods)
	if d.Revoked() == nil || d.Revoked().Reason != fencingv1.ReasonStartupDeadlineExceeded || d.Granted().PodName != "b" {
		t.Fatalf("want a revoked (StartupDeadlineExceeded) and b granted, got %+v", d)
	}
}
