package agent

import (
	"context"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fencedlease/fencedlease/pkg/holder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// Probe answers the agent's startupProbe: nil once the Lease shows cfg's grant renewed.
// Native sidecars hold back the containers after them until their startupProbe passes,
// so the workload starts only after the agent's first confirmed renewal, and a grant
// that never renewed is a grant whose workload never ran.
//
// In a Warm standby (cfg.Token 0: FENCING_TOKEN empty) the workload must start before any
// grant, so the probe passes as soon as the agent runs: once it published its state in
// stateFile (Waiting). The workload then learns of the grant from that file or the
// agent's endpoint, never from the probe.
func Probe(ctx context.Context, cfg holder.Config, stateFile string) error {
	if cfg.Token == 0 {
		if _, err := os.Stat(stateFile); err != nil {
			return fmt.Errorf("a Warm standby's agent has not published its state yet: %w", err)
		}
		return nil
	}
	l, err := cfg.Leases.Leases(cfg.Namespace).Get(ctx, cfg.Lease(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !leaserecord.Read(l).Started(cfg.Identity, cfg.Token) {
		return fmt.Errorf("lease %s/%s does not show token %d of %s renewed yet", cfg.Namespace, cfg.Lease(), cfg.Token, cfg.Identity)
	}
	return nil
}
