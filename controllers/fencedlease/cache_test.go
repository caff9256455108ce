package fencedlease

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// The cache keeps of a pod only what the controller reads, in a type far smaller than a
// Pod: at 10,000 FencedLeases with waiting pods the Pod structs alone were 40 % of the
// operator's heap. What the controller gets back is a Pod of its own with that much.
func TestCompactPodKeepsOnlyWhatTheControllerReads(t *testing.T) {
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
	got, err := compactPod(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	cached := got.(*cachedPod)
	if size, pod := unsafe.Sizeof(*cached), unsafe.Sizeof(*full); size*3 > pod {
		t.Errorf("a cached pod takes %d bytes, a Pod %d: it should be well under a third", size, pod)
	}
	slim := cached.pod()
	want := full.ObjectMeta.DeepCopy()
	want.ManagedFields = nil
	if !equality.Semantic.DeepEqual(slim.ObjectMeta, *want) {
		t.Errorf("metadata changed:\n got %+v\nwant %+v", slim.ObjectMeta, *want)
	}
	if !equality.Semantic.DeepEqual(slim.Spec, corev1.PodSpec{SchedulingGates: full.Spec.SchedulingGates, NodeName: "n1"}) {
		t.Errorf("spec kept more than the scheduling gates and the node: %+v", slim.Spec)
	}
	if !equality.Semantic.DeepEqual(slim.Status, corev1.PodStatus{Phase: corev1.PodRunning}) {
		t.Errorf("status kept more than the phase: %+v", slim.Status)
	}
	if slim.TypeMeta != full.TypeMeta {
		t.Errorf("type meta lost: %+v", slim.TypeMeta)
	}
	// The Pod handed out is the caller's own: changing it leaves the cache alone.
	slim.Labels["x"], slim.Spec.SchedulingGates[0].Name = "y", "other"
	if _, leaked := cached.Labels["x"]; leaked || cached.Gates[0].Name != fencingv1.SchedulingGate {
		t.Error("a change to the Pod handed out reached the cache")
	}
	copied := cached.DeepCopyObject().(*cachedPod)
	copied.Labels["z"] = "1"
	if _, leaked := cached.Labels["z"]; leaked || !equality.Semantic.DeepEqual(copied.Gates, cached.Gates) {
		t.Error("DeepCopyObject shares the labels, or lost the gates")
	}
	// The conditions the operator sets (W2, W3) are kept, and nothing else of the status.
	withOurs := full.DeepCopy()
	ours := []corev1.PodCondition{{Type: fencingv1.LeaseFoundCondition, Status: corev1.ConditionTrue},
		{Type: fencingv1.AdmittedCondition, Status: corev1.ConditionFalse, Reason: fencingv1.ReasonNotAdmitted}}
	withOurs.Status.Conditions = append(withOurs.Status.Conditions, ours...)
	gotOurs, err := compactPod(withOurs)
	if err != nil {
		t.Fatal(err)
	}
	if kept := gotOurs.(*cachedPod).DeepCopyObject().(*cachedPod).pod().Status.Conditions; !equality.Semantic.DeepEqual(kept, ours) {
		t.Errorf("conditions kept: %+v, want the operator's own: %+v", kept, ours)
	}
	// Of the container statuses: those that wait for a reason that says the container
	// cannot run, and those that restarted (how they last ended), no more.
	withStatuses := full.DeepCopy()
	exited := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, Message: "long", FinishedAt: now}}
	withStatuses.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "fine", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}},
		{Name: "restarted", RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}, LastTerminationState: exited},
		{Name: "looping", RestartCount: 2, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, LastTerminationState: exited},
	}
	got, _ = compactPod(withStatuses)
	lastExit := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}
	if want := []corev1.ContainerStatus{
		{Name: "restarted", RestartCount: 1, LastTerminationState: lastExit},
		{Name: "looping", RestartCount: 2, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, LastTerminationState: lastExit},
	}; !equality.Semantic.DeepEqual(got.(*cachedPod).pod().Status.ContainerStatuses, want) {
		t.Errorf("container statuses kept:\n got %+v\nwant %+v", got.(*cachedPod).pod().Status.ContainerStatuses, want)
	}
	// Anything else (a tombstone, a pod compacted already) passes through.
	other := "not a pod"
	if got, _ := compactPod(other); got != other {
		t.Errorf("non-pod changed: %v", got)
	}
	if again, _ := compactPod(cached); again != any(cached) {
		t.Error("a compacted pod was compacted again")
	}
	if keys, _ := indexByLease(cached); len(keys) != 1 || keys[0] != "ns/invoices" {
		t.Errorf("index keys %v, want [ns/invoices]", keys)
	}
}

// A pod version the controller already patched is not patched again (the cache lags its
// own write); a newer version is, and the memory fades after a minute.
func TestOwnWritesRemembersThePatchedVersion(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	o := newOwnWrites(clock)
	if o.wroteOver("u1", "5") {
		t.Fatal("nothing written yet")
	}
	o.wrote("u1", "5")
	if !o.wroteOver("u1", "5") {
		t.Error("version 5 was patched: a reconcile reading it again must not patch it again")
	}
	if o.wroteOver("u1", "6") || o.wroteOver("u2", "5") {
		t.Error("another version or pod is not covered")
	}
	o.wrote("u1", "6") // a second write in the same reconcile (finalizer, then status)
	if !o.wroteOver("u1", "5") || !o.wroteOver("u1", "6") {
		t.Error("both versions written over are behind")
	}
	clock.Step(ownWriteMemory)
	o.wrote("u2", "9") // prunes what is a minute old
	if o.wroteOver("u1", "5") {
		t.Error("remembered past a minute")
	}
	// A write refused on its version shows that version superseded just as well; any
	// other failure shows nothing (the version may still be the newest).
	written := func(rv string) *corev1.Pod {
		p := &corev1.Pod{}
		p.UID, p.ResourceVersion = "u3", rv
		return p
	}
	o.after(written("1"), "1", apierrors.NewConflict(schema.GroupResource{Resource: "leases"}, "l", errors.New("changed")))
	o.after(written("2"), "2", apierrors.NewTimeoutError("slow", 1))
	o.after(written("4"), "3", nil)
	if !o.wroteOver("u3", "1") || o.wroteOver("u3", "2") || !o.wroteOver("u3", "3") {
		t.Error("after: a conflict or a success supersedes the version, a timeout does not")
	}
	// A write the API server took as a no-op made no new version: nothing is behind it
	// (else every reconcile would wait a minute for a version that never comes).
	o.after(written("7"), "7", nil)
	if o.wroteOver("u3", "7") {
		t.Error("after: a no-op write (its version unchanged) supersedes nothing")
	}
	// Only the version a success made is its echo.
	if !o.echo(written("4")) || o.echo(written("1")) || o.echo(written("3")) || o.echo(written("5")) {
		t.Error("echo: exactly the version the successful write made")
	}
	var none *ownWrites
	none.wrote("u1", "1")
	if none.wroteOver("u1", "1") {
		t.Error("a nil memory remembers nothing")
	}
}

// A reconcile whose cache does not show yet the Lease this controller created for its
// FencedLease is behind (it would create it again, and be refused); once a reconcile saw
// that Lease, a Lease missing from the cache is news again.
func TestALeaseItCreatedAndTheCacheDoesNotShowIsBehind(t *testing.T) {
	o := newOwnWrites(clocktesting.NewFakeClock(time.Unix(1000, 0)))
	fl := newFL(10)
	fl.UID = "uid-fl"
	lease := tombstone(1)
	lease.UID, lease.ResourceVersion = "uid-lease", "7"
	if o.behind(fl, decision.SlotLease{Owner: fl.UID}, nil, nil) {
		t.Fatal("nothing created yet")
	}
	o.createdLease(decision.SlotLease{Owner: fl.UID}, lease)
	if !o.behind(fl, decision.SlotLease{Owner: fl.UID}, nil, nil) {
		t.Error("the cache does not show the Lease just created: behind")
	}
	if !o.echo(lease) {
		t.Error("the created version is the creation's echo")
	}
	if o.behind(fl, decision.SlotLease{Owner: fl.UID}, lease, nil) {
		t.Error("the cache shows the created Lease: not behind")
	}
	if o.behind(fl, decision.SlotLease{Owner: fl.UID}, nil, nil) {
		t.Error("a Lease gone after the cache showed it is news, not a lag")
	}
}
