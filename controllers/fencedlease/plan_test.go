package fencedlease

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

func kinds(p decision.Plan) []decision.StepKind {
	var out []decision.StepKind
	for _, s := range p.Steps {
		out = append(out, s.Kind)
	}
	return out
}

// checkOrder fails unless p's steps run in the protocol's order, each at most once, and a
// finalizer is released only as the last step, on a deleted FencedLease left with no
// holder (D1).
func checkOrder(t *testing.T, fl *fencingv1.FencedLease, d decision.Decision) {
	t.Helper()
	ks := kinds(d.Plan)
	if !slices.IsSorted(ks) || len(slices.Compact(slices.Clone(ks))) != len(ks) {
		t.Fatalf("steps out of order or repeated: %v", ks)
	}
	if d.Plan.Has(decision.ReleaseFinalizer) && (fl.DeletionTimestamp == nil || d.Status.Holder != nil) {
		t.Fatalf("the finalizer is released with holder %+v (deleting: %v)", d.Status.Holder, fl.DeletionTimestamp != nil)
	}
	for _, s := range d.Plan.Steps {
		if s.Protocol == "" {
			t.Fatalf("step %v carries out no protocol step", s.Kind)
		}
	}
}

// The plan of each kind of pass: what it writes, in which order, and what it asks next.
func TestPlanOfEachKindOfPass(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	tr := decision.NewGrantMemory(c)
	fl := newFL(10)
	cold, warm := pod("a", t0), warmPod("w", t0.Add(time.Second))
	warm.Status.Phase = corev1.PodRunning

	// G1 on an idle FencedLease, a Cold pod: the Lease first, then the pod patched so it
	// can start; the status and the rest wait for the first renewal (P1, G4).
	d := step(tr, c, fl, nil, []corev1.Pod{cold, warm})
	checkOrder(t, fl, d)
	if want := []decision.StepKind{decision.WriteLease, decision.DemotePods, decision.PromoteHolder}; !slices.Equal(kinds(d.Plan), want) {
		t.Fatalf("grant to a Cold pod: %v, want %v", kinds(d.Plan), want)
	}
	if d.Plan.RequeueAfter != decision.CacheBehind || d.Plan.Priority != decision.RequeueFollowUp || d.Plan.Settles {
		t.Fatalf("grant to a Cold pod: %+v, want a follow-up", d.Plan)
	}

	// The same for a running Warm standby: it starts on the Lease, so only the Lease now.
	warmFL := newFL(10)
	d = step(decision.NewGrantMemory(c), c, warmFL, nil, []corev1.Pod{warm})
	checkOrder(t, warmFL, d)
	if want := []decision.StepKind{decision.WriteLease}; !slices.Equal(kinds(d.Plan), want) {
		t.Fatalf("grant to a Warm standby: %v, want %v", kinds(d.Plan), want)
	}

	// Its first renewal: recorded, and the grant kept settled until its expiry.
	h := fl.Status.Holder.DeepCopy()
	c.Step(time.Second)
	d = step(tr, c, fl, leaseFor(h, c.Now()), []corev1.Pod{cold, warm})
	checkOrder(t, fl, d)
	if want := []decision.StepKind{decision.WriteStatus, decision.WriteLease, decision.DemotePods, decision.PromoteHolder, decision.DeleteRevoked}; !slices.Equal(kinds(d.Plan), want) {
		t.Fatalf("first renewal: %v, want %v", kinds(d.Plan), want)
	}
	if !d.Plan.Settles || d.Plan.RequeueAfter != 10*time.Second || d.Plan.Priority != decision.RequeueNormal {
		t.Fatalf("first renewal: %+v, want settled until the expiry in 10s", d.Plan)
	}

	// A revoke request: cut off on the Lease first, told, then the status.
	fl.Annotations = map[string]string{fencingv1.RevokeAnnotation: "1"}
	d = step(tr, c, fl, leaseFor(h, c.Now()), []corev1.Pod{cold, warm})
	checkOrder(t, fl, d)
	if want := []decision.StepKind{decision.CutLease, decision.TellCutOff, decision.WriteStatus, decision.WriteLease, decision.DemotePods, decision.PromoteHolder, decision.DeleteRevoked}; !slices.Equal(kinds(d.Plan), want) {
		t.Fatalf("revoke request: %v, want %v", kinds(d.Plan), want)
	}
	if d.Plan.Settles {
		t.Fatal("a cut-off holder is settled")
	}

	// Deleted while its holder stands cut off: the holder is revoked (D1) and only then,
	// with no holder left, the finalizer goes, last.
	fl.DeletionTimestamp = ptr.To(metav1.NewTime(c.Now()))
	cut := leaseFor(h, c.Now())
	leaserecord.CutOff(cut, "") // as the plan cuts off on request (leaseCut)
	d = step(tr, c, fl.DeepCopy(), cut, []corev1.Pod{cold, warm})
	checkOrder(t, fl, d)
	if d.Revoked() == nil || d.Revoked().Reason != fencingv1.ReasonFencedLeaseDeleted {
		t.Fatalf("deleted while cut off: revoked %+v, want FencedLeaseDeleted (end %+v)", d.Revoked(), d.End)
	}
	if ks := kinds(d.Plan); ks[len(ks)-1] != decision.ReleaseFinalizer {
		t.Fatalf("deleted, holder revoked: %v, want the finalizer released last", ks)
	}
}

// A deleted FencedLease whose grant only the Lease recorded adopts it first: a holder
// stands, so the finalizer is not released in that pass (D1).
func TestPlanKeepsTheFinalizerWhileAHolderStands(t *testing.T) {
	c, tr, _, pods, h := grantedToA()
	idle := newFL(10) // the status never recorded h: only the Lease did (G2)
	idle.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	d := step(tr, c, idle, leaseFor(h, t0), pods)
	checkOrder(t, idle, d)
	if d.Plan.Has(decision.ReleaseFinalizer) {
		t.Fatalf("the finalizer released while the Lease's grant stands: %v (status holder %+v)", kinds(d.Plan), d.Status.Holder)
	}
}

// A Lease the operator did not create is never written (A3).
func TestPlanNeverWritesAForeignLease(t *testing.T) {
	c := clocktesting.NewFakeClock(t0)
	fl := newFL(10)
	foreign := tombstone(3)
	foreign.Labels = nil
	d := step(decision.NewGrantMemory(c), c, fl, foreign, []corev1.Pod{pod("a", t0)})
	checkOrder(t, fl, d)
	if d.Plan.Has(decision.CutLease) || d.Plan.Has(decision.WriteLease) {
		t.Fatalf("a foreign Lease is written: %v", kinds(d.Plan))
	}
}
