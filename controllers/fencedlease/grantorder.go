package fencedlease

import (
	corev1 "k8s.io/api/core/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// GrantOrder is the waiting queue of a FencedLease with status st, in the order the
// controller grants it: the named successor of a hand-off first, then the oldest
// candidate (ties by name). Tools (kubectl fencedlease status) show it from this, so
// what they show is what the controller does — but for one case it cannot see from the
// objects alone: when a holder's grant ends while a pod of a newer revision of its own
// workload waits, the controller grants that pod first (H4, remembered in memory).
func GrantOrder(pods []corev1.Pod, st *fencingv1.FencedLeaseStatus) []*corev1.Pod {
	waiting := candidates(pods, st, "")
	if i := successorIndex(waiting, st.Holder, nil); i > 0 {
		next := waiting[i]
		copy(waiting[1:i+1], waiting[:i])
		waiting[0] = next
	}
	return waiting
}
