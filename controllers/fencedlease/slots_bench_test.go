package fencedlease

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// BenchmarkPassOverHundredSlots is one pass over a FencedLease of 100 held slots with two
// waiting pods a slot, every holder renewed and nothing to write: what judging the slots
// costs (the pods come as from the pod cache; the Leases through the fake client). A
// profile of it (-cpuprofile) shows where a pass over many slots spends its time.
func BenchmarkPassOverHundredSlots(b *testing.B) {
	const n = 100
	var slots []fencingv1.Slot
	var objs []client.Object
	for i := range int32(n) {
		h := slotHolder(fmt.Sprintf("p%d", i), int64(i+1), true)
		h.LeaseDurationSeconds = 10
		slots = append(slots, fencingv1.Slot{Slot: i, Holder: h})
		objs = append(objs, slotLeaseNaming(i, h, t0), holdingPod(h.PodName, h.Token, i))
		for j := range 2 {
			w := pod(fmt.Sprintf("w%d-%d", i, j), t0.Add(time.Duration(int(i)*2+j)*time.Millisecond))
			objs = append(objs, &w)
		}
	}
	fl := slotsFL(n, slots...)
	fl.Finalizers = []string{fencingv1.Finalizer}
	f := fixtureOf(append(objs, fl)...)
	t := &testing.T{}
	f.reconcile(t) // the holders' pods labeled
	f.reconcile(t)
	pods, err := f.r.pods.forLease(key.Namespace, key.Name)
	if err != nil {
		b.Fatal(err)
	}
	f.r.pods = fixedPods(pods)
	for b.Loop() {
		f.reconcile(t)
	}
	if t.Failed() {
		b.Fatal("a pass failed")
	}
}

// fixedPods lists the same pods, a copy each time, as the pod cache does.
type fixedPods []corev1.Pod

func (f fixedPods) forLease(string, string) ([]corev1.Pod, error) {
	out := make([]corev1.Pod, len(f))
	for i := range f {
		f[i].DeepCopyInto(&out[i])
	}
	return out, nil
}
