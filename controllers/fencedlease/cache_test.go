package fencedlease

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// The cache keeps of a pod only what the controller reads: at 10,000 FencedLeases with
// waiting pods the specs and statuses would be most of the operator's memory.
func TestSlimPodKeepsOnlyWhatTheControllerReads(t *testing.T) {
	now := metav1.Now()
	full := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "a", UID: "u1", ResourceVersion: "7", CreationTimestamp: now, DeletionTimestamp: &now,
			Labels:          map[string]string{fencingv1.LeaseLabel: "invoices", "pod-template-hash": "abc"},
			Annotations:     map[string]string{fencingv1.StateAnnotation: "Waiting"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", UID: "rs1"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: corev1.PodSpec{
			SchedulingGates: []corev1.PodSchedulingGate{{Name: fencingv1.SchedulingGate}},
			Containers:      []corev1.Container{{Name: "work", Image: "example.invalid/work", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
			NodeName:        "n1",
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
	}
	got, err := slimPod(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	slim := got.(*corev1.Pod)
	want := full.ObjectMeta.DeepCopy()
	want.ManagedFields = nil
	if !equality.Semantic.DeepEqual(slim.ObjectMeta, *want) {
		t.Errorf("metadata changed:\n got %+v\nwant %+v", slim.ObjectMeta, *want)
	}
	if !equality.Semantic.DeepEqual(slim.Spec, corev1.PodSpec{SchedulingGates: full.Spec.SchedulingGates}) {
		t.Errorf("spec kept more than the scheduling gates: %+v", slim.Spec)
	}
	if !equality.Semantic.DeepEqual(slim.Status, corev1.PodStatus{Phase: corev1.PodRunning}) {
		t.Errorf("status kept more than the phase: %+v", slim.Status)
	}
	if slim.TypeMeta != full.TypeMeta {
		t.Errorf("type meta lost: %+v", slim.TypeMeta)
	}
	// Anything else (a tombstone) passes through.
	other := "not a pod"
	if got, _ := slimPod(other); got != other {
		t.Errorf("non-pod changed: %v", got)
	}
}

// A pod version the controller already patched is not patched again (the cache lags its
// own write); a newer version is, and the memory fades after a minute.
func TestOwnWritesRemembersThePatchedVersion(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	o := newOwnWrites(clock)
	if o.landed("u1", "5") {
		t.Fatal("nothing written yet")
	}
	o.wrote("u1", "5")
	if !o.landed("u1", "5") {
		t.Error("version 5 was patched: a reconcile reading it again must not patch it again")
	}
	if o.landed("u1", "6") || o.landed("u2", "5") {
		t.Error("another version or pod is not covered")
	}
	o.wrote("u1", "6") // a second write in the same reconcile (finalizer, then status)
	if !o.landed("u1", "5") || !o.landed("u1", "6") {
		t.Error("both versions written over are behind")
	}
	clock.Step(ownWriteMemory)
	o.wrote("u2", "9") // prunes what is a minute old
	if o.landed("u1", "5") {
		t.Error("remembered past a minute")
	}
	var none *ownWrites
	none.wrote("u1", "1")
	if none.landed("u1", "1") {
		t.Error("a nil memory remembers nothing")
	}
}
