package bench

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlease/fencedlease/config/policy"
)

// installFinalizerPolicy installs config/policy's finalizer policy, as every install does,
// so a new FencedLease costs the operator what it costs in a cluster: no finalizer write.
// The validating policies stay out: they guard against other users, whom the bench has
// none of, and client-go's side runs without their cost too.
func installFinalizerPolicy(ctx context.Context, c client.Client) error {
	objs, err := policy.Objects("")
	if err != nil {
		return err
	}
	for _, o := range objs {
		if kind := o.GetKind(); kind != "MutatingAdmissionPolicy" && kind != "MutatingAdmissionPolicyBinding" {
			continue
		}
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return policy.AwaitFinalizer(ctx, c, "default", time.Minute)
}
