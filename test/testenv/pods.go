package testenv

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// CandidatePod is a pod as the admission webhook leaves a candidate: labeled for lease,
// gated, state Waiting. For suites that run without the webhook.
func CandidatePod(ns, name, lease string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   ns,
			Name:        name,
			Labels:      map[string]string{fencingv1.LeaseLabel: lease},
			Annotations: map[string]string{fencingv1.StateAnnotation: string(fencingv1.PodWaiting)},
		},
		Spec: corev1.PodSpec{
			SchedulingGates: []corev1.PodSchedulingGate{{Name: fencingv1.SchedulingGate}},
			Containers:      []corev1.Container{{Name: "work", Image: "example.invalid/work"}},
		},
	}
}

// WarmCandidatePod is a pod as the webhook leaves a candidate of a Warm FencedLease:
// labeled, state Waiting, standby Warm, no gate.
func WarmCandidatePod(ns, name, lease string) *corev1.Pod {
	p := CandidatePod(ns, name, lease)
	p.Spec.SchedulingGates = nil
	p.Annotations[fencingv1.StandbyAnnotation] = string(fencingv1.StandbyWarm)
	return p
}
