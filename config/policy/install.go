package policy

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// CandidateAdmissionNames are the objects that admit candidate pods: the
// MutatingAdmissionPolicy, the ValidatingAdmissionPolicy that checks its work (each with
// its binding of the same name) and their parameter. They restrict nobody else, so a
// control plane whose operator and pods run as any user can have them alone.
var CandidateAdmissionNames = []string{ParamsName, "fencedlease-candidate", "fencedlease-candidate-check"}

// CandidateAdmission is Objects' CandidateAdmissionNames.
func CandidateAdmission(operator, agentImage string) ([]*unstructured.Unstructured, error) {
	objs, err := Objects(operator, agentImage)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool {
		return !slices.Contains(CandidateAdmissionNames, o.GetName())
	}), nil
}

// Install creates objs, and the namespaces they live in first.
func Install(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// WaitUntilCandidatesAdmitted waits until the API server admits a labeled pod as a
// candidate (gated), probing with a server-side dry run: it loads policies
// asynchronously, and a pod created before would be refused or, with neither policy
// loaded yet, stored ungated.
func WaitUntilCandidatesAdmitted(ctx context.Context, c client.Client) error {
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "admission-probe-",
			Labels: map[string]string{fencingv1.LeaseLabel: "probe"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}},
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p := probe.DeepCopy()
		if err := c.Create(ctx, p, client.DryRunAll); err != nil {
			return false, nil
		}
		return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
			return g.Name == fencingv1.SchedulingGate
		}), nil
	})
}
