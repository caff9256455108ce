package agent

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fencedlease/fencedlease/internal/leaserecord"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

// Probe answers the agent's startupProbe: nil once the Lease shows cfg's grant renewed.
// Native sidecars hold back the containers after them until their startupProbe passes,
// so the workload starts only after the agent's first confirmed renewal, and a grant
// that never renewed is a grant whose workload never ran.
func Probe(ctx context.Context, cfg holder.Config) error {
	l, err := cfg.Leases.Leases(cfg.Namespace).Get(ctx, cfg.LeaseName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !leaserecord.Read(l).Started(cfg.Identity, cfg.Token) {
		return fmt.Errorf("lease %s/%s does not show token %d of %s renewed yet", cfg.Namespace, cfg.LeaseName, cfg.Token, cfg.Identity)
	}
	return nil
}
