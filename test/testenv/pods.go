package testenv

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// CandidatePod is a pod as admission leaves a candidate: labeled for lease, gated, state
// Waiting. For suites that run without admission.
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

// WarmCandidatePod is a candidate of a Warm FencedLease as the operator leaves it once it
// let it run (W1): labeled, state Waiting, standby Warm, no gate.
func WarmCandidatePod(ns, name, lease string) *corev1.Pod {
	p := CandidatePod(ns, name, lease)
	p.Spec.SchedulingGates = nil
	p.Annotations[fencingv1.StandbyAnnotation] = string(fencingv1.StandbyWarm)
	return p
}

// Restrict enforces the restricted Pod Security profile on namespace ns and puts it under a
// ResourceQuota on requests and limits: where every container must declare both, and run
// without privileges, as an injected agent must too.
func Restrict(ctx context.Context, c client.Client, ns string) error {
	nsObj := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		return err
	}
	if nsObj.Labels == nil {
		nsObj.Labels = map[string]string{}
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if err := c.Update(ctx, nsObj); err != nil {
		return err
	}
	quota := corev1.ResourceList{}
	for _, r := range []corev1.ResourceName{"requests.cpu", "requests.memory", "limits.cpu", "limits.memory"} {
		quota[r] = resource.MustParse("8")
	}
	return c.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"},
		Spec: corev1.ResourceQuotaSpec{Hard: quota}})
}

// RestrictedAgentPod is a candidate of lease asking for the agent whose own container
// meets the restricted profile and declares requests and limits: admitted in a namespace
// Restrict made, only if the injected agent meets them too.
func RestrictedAgentPod(ns, name, lease string) *corev1.Pod {
	restricted := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true),
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	sized := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{fencingv1.LeaseLabel: lease},
			Annotations: map[string]string{fencingv1.AgentAnnotation: "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "work", Image: "example.invalid/work",
			SecurityContext: restricted, Resources: sized}}},
	}
}
