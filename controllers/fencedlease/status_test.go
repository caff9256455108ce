package fencedlease

import (
	"math"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

func TestSetHeldCondition(t *testing.T) {
	started := &metav1.MicroTime{}
	holder := &fencingv1.Holder{PodName: "a", PodUID: "u", Token: 7, FirstRenewTime: started}
	cases := []struct {
		name     string
		holder   *fencingv1.Holder
		suspend  bool
		deleting bool
		token    int64
		foreign  string
		status   metav1.ConditionStatus
		reason   string
		message  string
	}{
		{"held", holder, false, false, 7, "", metav1.ConditionTrue, fencingv1.ReasonGranted, "pod a holds token 7"},
		{"held while suspended", holder, true, false, 7, "", metav1.ConditionTrue, fencingv1.ReasonGranted, "pod a holds token 7"},
		{"suspended", nil, true, false, 7, "", metav1.ConditionFalse, fencingv1.ReasonSuspended, "spec.suspend is true; 2 pod(s) waiting"},
		{"deleting", nil, true, true, 7, "", metav1.ConditionFalse, fencingv1.ReasonDeleting, "the FencedLease is being deleted; no new grants"},
		{"nobody", nil, false, false, 7, "", metav1.ConditionFalse, fencingv1.ReasonNoCandidates,
			"no pod labeled fencing.fencedlease.io/lease=invoices is waiting in this namespace"},
		{"a Lease the operator did not create, even with a holder", holder, false, false, 7, "invoices", metav1.ConditionFalse,
			fencingv1.ReasonLeaseConflict, "Lease ns/invoices exists and was not created by the operator (it lacks label " +
				"fencing.fencedlease.io/lease=invoices); the operator will not adopt it: delete or rename it, or give this FencedLease another name"},
		{"tokens exhausted", nil, true, false, math.MaxInt64, "", metav1.ConditionFalse, fencingv1.ReasonTokensExhausted,
			"the highest fencing token is 9223372036854775807, the int64 limit: no token is left to grant; use a FencedLease of another name"},
		{"starting", &fencingv1.Holder{PodName: "a", PodUID: "u", Token: 7, StartupDeadlineSeconds: 300}, false, false, 7, "",
			metav1.ConditionTrue, fencingv1.ReasonGranted, "pod a holds token 7; starting: it must renew for the first time within the startup deadline (300s)"},
		{"the last token is held", &fencingv1.Holder{PodName: "a", PodUID: "u", Token: math.MaxInt64, FirstRenewTime: started}, false, false, math.MaxInt64, "",
			metav1.ConditionTrue, fencingv1.ReasonGranted, "pod a holds token 9223372036854775807"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fl := newFL(10)
			fl.Spec.Suspend = tc.suspend
			if tc.deleting {
				fl.DeletionTimestamp = ptr.To(metav1.Now())
			}
			st := &fencingv1.FencedLeaseStatus{Holder: tc.holder, Waiting: 2, FencingToken: tc.token}
			decision.SetHeldCondition(st, fl, tc.foreign, false)
			c := meta.FindStatusCondition(st.Conditions, fencingv1.ConditionHeld)
			if c == nil || c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.message || c.ObservedGeneration != 1 {
				t.Fatalf("got %+v", c)
			}
		})
	}
}

func TestSetReadyCondition(t *testing.T) {
	started := &metav1.MicroTime{}
	holding := &fencingv1.Holder{PodName: "a", PodUID: "u", Token: 7, FirstRenewTime: started}
	starting := &fencingv1.Holder{PodName: "a", PodUID: "u", Token: 7, StartupDeadlineSeconds: 300}
	cases := []struct {
		name     string
		holder   *fencingv1.Holder
		waiting  int32
		suspend  bool
		deleting bool
		token    int64
		foreign  string
		status   metav1.ConditionStatus
		reason   string
		message  string
	}{
		{"held and renewing", holding, 2, false, false, 7, "", metav1.ConditionTrue, fencingv1.ReasonHeld, "pod a holds token 7"},
		{"granted, not renewed yet", starting, 0, false, false, 7, "", metav1.ConditionFalse, fencingv1.ReasonHolderStarting,
			"pod a is granted token 7 and has not renewed yet (startup deadline 300s)"},
		{"idle", nil, 0, false, false, 7, "", metav1.ConditionTrue, fencingv1.ReasonIdle, "nobody holds the grant and nobody is waiting"},
		{"suspended as asked, pods waiting", nil, 3, true, false, 7, "", metav1.ConditionTrue, fencingv1.ReasonSuspended,
			"spec.suspend is true; 3 pod(s) waiting"},
		{"held while suspended", holding, 3, true, false, 7, "", metav1.ConditionTrue, fencingv1.ReasonHeld, "pod a holds token 7"},
		{"deleting", nil, 0, false, true, 7, "", metav1.ConditionFalse, fencingv1.ReasonDeleting, "the FencedLease is being deleted; no new grants"},
		{"foreign Lease", holding, 0, false, false, 7, "invoices", metav1.ConditionFalse, fencingv1.ReasonLeaseConflict, ""},
		{"tokens exhausted", nil, 1, false, false, math.MaxInt64, "", metav1.ConditionFalse, fencingv1.ReasonTokensExhausted, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fl := newFL(10)
			fl.Spec.Suspend = tc.suspend
			if tc.deleting {
				fl.DeletionTimestamp = ptr.To(metav1.Now())
			}
			st := &fencingv1.FencedLeaseStatus{Holder: tc.holder, Waiting: tc.waiting, FencingToken: tc.token}
			decision.SetHeldCondition(st, fl, tc.foreign, false)
			decision.SetReadyCondition(st, fl)
			c := meta.FindStatusCondition(st.Conditions, fencingv1.ConditionReady)
			if c == nil || c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 1 {
				t.Fatalf("got %+v", c)
			}
			if tc.message != "" && c.Message != tc.message {
				t.Fatalf("message %q, want %q", c.Message, tc.message)
			}
			if c.Status == metav1.ConditionFalse && c.Message == "" {
				t.Fatal("a False Ready must say why")
			}
		})
	}
}

// TestEveryHeldReasonHasAReadyVerdict pins Ready's verdict for each Held reason, and
// that a reason it does not know reads as not ready.
func TestEveryHeldReasonHasAReadyVerdict(t *testing.T) {
	known := map[string]metav1.ConditionStatus{
		fencingv1.ReasonGranted: metav1.ConditionTrue, fencingv1.ReasonNoCandidates: metav1.ConditionTrue,
		fencingv1.ReasonSuspended: metav1.ConditionTrue, fencingv1.ReasonDeleting: metav1.ConditionFalse,
		fencingv1.ReasonLeaseConflict: metav1.ConditionFalse, fencingv1.ReasonTokensExhausted: metav1.ConditionFalse,
	}
	for reason, want := range known {
		st := &fencingv1.FencedLeaseStatus{Holder: &fencingv1.Holder{PodName: "a", FirstRenewTime: &metav1.MicroTime{}}}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: fencingv1.ConditionHeld, Status: metav1.ConditionFalse, Reason: reason, Message: "m"})
		decision.SetReadyCondition(st, newFL(10))
		if got := meta.FindStatusCondition(st.Conditions, fencingv1.ConditionReady).Status; got != want {
			t.Errorf("Held %s: Ready %s, want %s", reason, got, want)
		}
	}
	st := &fencingv1.FencedLeaseStatus{}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: fencingv1.ConditionHeld, Status: metav1.ConditionFalse, Reason: "SomethingNew", Message: "m"})
	decision.SetReadyCondition(st, newFL(10))
	if c := meta.FindStatusCondition(st.Conditions, fencingv1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != "SomethingNew" {
		t.Errorf("an unknown Held reason must read as not ready, got %+v", c)
	}
}
