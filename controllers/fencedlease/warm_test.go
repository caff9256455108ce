package fencedlease

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/internal/grantorder"
)

func warmPod(name string, created time.Time) corev1.Pod {
	p := pod(name, created)
	p.Annotations[fencingv1.StandbyAnnotation] = string(fencingv1.StandbyWarm)
	p.Spec.SchedulingGates = nil
	return p
}

// A Warm candidate runs ungated; a Cold one must still be held by our gate alone; neither
// is a candidate once it shows it cannot start.
func TestCandidatesInBothStandbyModes(t *testing.T) {
	coldUngated := pod("cold-ungated", t0)
	coldUngated.Spec.SchedulingGates = nil
	warmGated := warmPod("warm-gated", t0)
	warmGated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "queue.example/admit"}}
	badWarm := warmPod("warm-bad-image", t0)
	badWarm.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "work",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
	pods := []corev1.Pod{pod("cold", t0.Add(2*time.Second)), warmPod("warm", t0.Add(time.Second)), coldUngated, warmGated, badWarm}
	var got []string
	for _, p := range grantorder.Candidates(pods, &fencingv1.FencedLeaseStatus{}, "") {
		got = append(got, p.Name)
	}
	if want := []string{"warm", "cold"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("candidates %v, want %v (oldest first, whatever the mode)", got, want)
	}
}

// The next grant goes to the hand-off's successor, else to a waiting pod of a newer
// revision of the ended holder's workload (H4), else to the oldest.
func TestSuccessorIndex(t *testing.T) {
	old, newer := warmPod("old", t0), warmPod("newer", t0.Add(time.Second))
	waiting := []*corev1.Pod{&old, &newer}
	ended := &fencingv1.Holder{PodName: "h", PodUID: "uid-h", Token: 1}
	if i := grantorder.SuccessorIndex(waiting, ended, nil); i != 0 {
		t.Fatalf("without a newer revision: %d, want the oldest", i)
	}
	if i := grantorder.SuccessorIndex(waiting, ended, &newer); i != 1 {
		t.Fatalf("with a newer revision waiting: %d, want it", i)
	}
	if i := grantorder.SuccessorIndex(waiting, nil, &newer); i != 0 {
		t.Fatalf("no grant ended: %d, want the oldest", i)
	}
	ended.Handoff = &fencingv1.Handoff{SuccessorName: "old", SuccessorUID: old.UID}
	if i := grantorder.SuccessorIndex(waiting, ended, &newer); i != 0 {
		t.Fatalf("a hand-off named its successor: %d, want it", i)
	}
}

// H4 prefers the newer revision's standby only when it can take over now: one whose image
// is still being pulled — or failing to be, between two back-offs — is passed over for a
// running standby of the old revision; once it runs, it is preferred.
func TestANewerRevisionThatCannotTakeOverNowIsNotPreferred(t *testing.T) {
	old := warmOn("old", t0, "node-a", corev1.PodRunning)
	newer := warmOn("newer", t0.Add(time.Second), "node-b", corev1.PodPending)
	newer.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "work",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}}
	fl := newFL(10)
	fl.Status = fencingv1.FencedLeaseStatus{FencingToken: 1, Holder: &fencingv1.Holder{PodName: "h", PodUID: "uid-h", Token: 1}}
	granted := func() string {
		t.Helper()
		waiting := grantorder.PassOver(grantorder.Candidates([]corev1.Pod{old, newer}, &fencingv1.FencedLeaseStatus{}, ""), nil)
		tr, ok := decision.GrantRule(decision.World{FL: fl, Now: t0.Add(time.Minute), Successor: &newer}, &fencingv1.FencedLeaseStatus{FencingToken: 1}, waiting)
		if !ok {
			t.Fatalf("nobody granted: %+v", tr)
		}
		return tr.Holder.PodName
	}
	if got := granted(); got != "old" {
		t.Fatalf("granted %s, want the running standby old over newer, still pulling", got)
	}
	newer.Status.Phase = corev1.PodRunning
	newer.Status.ContainerStatuses = nil
	if got := granted(); got != "newer" {
		t.Fatalf("granted %s, want newer (H4) once it runs", got)
	}
}
