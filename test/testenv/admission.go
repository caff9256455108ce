package testenv

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// candidateAdmission are the bundle's objects that admit candidate pods in the default
// install: the MutatingAdmissionPolicy and its check, their binding, the parameter and its
// namespace. They restrict no one else, so a controller running as any user works beside them.
var candidateAdmission = []string{"fencedlease-system", "fencedlease-admission-params", "fencedlease-candidate", "fencedlease-candidate-check"}

// InstallCandidateAdmission creates them from dist/install.yaml and waits until the API
// server admits a labeled pod with them (it loads policies asynchronously).
func InstallCandidateAdmission(ctx context.Context, c client.Client) error {
	objs, err := BundleObjects()
	if err != nil {
		return err
	}
	for _, o := range objs {
		if !slices.Contains(candidateAdmission, o.GetName()) {
			continue
		}
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "admission-probe-", Labels: map[string]string{fencingv1.LeaseLabel: "probe"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe"}}},
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p := probe.DeepCopy()
		if err := c.Create(ctx, p, client.DryRunAll); err != nil {
			return false, nil
		}
		return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == fencingv1.SchedulingGate }), nil
	})
}
