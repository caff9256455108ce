package agentcmd

import (
	"context"
	"flag"
	"os"
	"time"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/agent"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

// Agent is `agent`: the renewal sidecar the webhook injects into pods that ask for it. It
// reads its grant from the injected env and renews until the pod stops. With --probe it
// is the sidecar's startupProbe instead: it exits 0 once the Lease shows the grant renewed
// (Cold), or once the agent has published its state (Warm: the workload must start first).
func Agent(args []string) error {
	fs := flag.NewFlagSet("agent", flag.ExitOnError)
	probe := fs.Bool("probe", false, "Answer the startupProbe: succeed once the grant was renewed, then exit.")
	var opts agent.Options
	fs.StringVar(&opts.StateFile, "state-file", fencingv1.AgentStateFile,
		"Where to keep the agent's view of the grant for the workload (JSON: state, token, local deadline); empty for none.")
	fs.StringVar(&opts.Listen, "state-address", fencingv1.AgentStateAddress,
		"Localhost address whose /state answers with the same JSON; empty for none.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// A Warm standby's FENCING_TOKEN is empty (its containers started before the grant):
	// the agent waits for its grant.
	fromEnv := holder.Config.FromEnv
	if os.Getenv(fencingv1.EnvToken) == "" {
		fromEnv = holder.Config.NamesFromEnv
	}
	cfg, err := fromEnv(holder.Config{})
	if err != nil {
		return err
	}
	if cfg.Leases, err = leaseClient(); err != nil {
		return err
	}
	if *probe {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second) // within the probe's timeout
		defer cancel()
		return agent.Probe(ctx, cfg, opts.StateFile)
	}
	return agent.Run(signalContext(), cfg, opts, newLogger("agent"))
}
