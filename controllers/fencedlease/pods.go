package fencedlease

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/leaserecord"
)

// candidates are the pods that may be granted next, oldest first (ties by name): those
// the admission webhook made candidates (state Waiting, still held back by the
// scheduling gate) that no other scheduling gate holds back any more. A pod labeled after it was created never went through the webhook,
// and a pod whose gate is gone may already run ungranted: neither is ever granted. A pod
// that ever held a token, or was released or revoked, never gets a second grant: one
// pod, one generation. ended names a grant that ended in this decision, before its pod
// could be marked.
func candidates(pods []corev1.Pod, st *fencingv1.FencedLeaseStatus, ended types.UID) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.UID == ended || (st.Holder != nil && p.UID == st.Holder.PodUID) ||
			(st.LastRevocation != nil && p.UID == st.LastRevocation.PodUID) {
			continue
		}
		if p.DeletionTimestamp != nil || finished(p) {
			continue
		}
		if _, has := p.Annotations[fencingv1.TokenAnnotation]; has {
			continue
		}
		if podState(p) != fencingv1.PodWaiting || !onlyOurGate(p) {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func podState(p *corev1.Pod) fencingv1.PodState {
	return fencingv1.PodState(p.Annotations[fencingv1.StateAnnotation])
}

// findPod finds the pod with uid among pods.
func findPod(pods []corev1.Pod, uid types.UID) *corev1.Pod {
	for i := range pods {
		if pods[i].UID == uid {
			return &pods[i]
		}
	}
	return nil
}

// onlyOurGate is true when our scheduling gate is the only one left: a pod another gate
// still holds (a queue's, say) could not start if granted, and would spend its startup
// deadline and everyone's wait for nothing.
func onlyOurGate(p *corev1.Pod) bool {
	return len(p.Spec.SchedulingGates) == 1 && p.Spec.SchedulingGates[0].Name == fencingv1.SchedulingGate
}

// parseToken and formatToken read and write a token annotation, on pods as on Leases.
var (
	parseToken  = leaserecord.ParseToken
	formatToken = leaserecord.FormatToken
)
