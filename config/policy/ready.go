package policy

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// finalizer is the operator's finalizer, which fencedlease_finalizer.yaml puts on every
// new FencedLease (fencingv1.Finalizer; this package does not import the API).
const finalizer = "fencing.fencedlease.io/revoke-holder"

// AwaitFinalizer waits until a FencedLease created in namespace comes back with the
// operator's finalizer, tried by server-side dry runs (nothing is stored). The API server
// loads a new policy asynchronously, and a mutating policy learns a new CRD's schema
// seconds after the CRD serves: until then it refuses the CRD's creations with 503
// ServiceUnavailable, whatever its failurePolicy. A test or an embedded control plane
// that creates FencedLeases right after installing waits here first.
func AwaitFinalizer(ctx context.Context, c client.Client, namespace string, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		probe := &unstructured.Unstructured{}
		probe.SetAPIVersion("fencing.fencedlease.io/v1alpha1")
		probe.SetKind("FencedLease")
		probe.SetNamespace(namespace)
		probe.SetGenerateName("finalizer-probe-")
		if last = c.Create(ctx, probe, client.DryRunAll); last != nil {
			return false, nil
		}
		last = fmt.Errorf("a new FencedLease has finalizers %v", probe.GetFinalizers())
		return slices.Contains(probe.GetFinalizers(), finalizer), nil
	})
	if err != nil {
		return fmt.Errorf("the FencedLease finalizer policy is not in force after %v: %w", timeout, last)
	}
	return nil
}
