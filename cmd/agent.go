package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

// runAgent is `fencedlease agent`: the renewal sidecar the webhook injects into pods that
// ask for it. It reads its grant from the injected env and renews until the pod stops.
// With --probe it is the sidecar's startupProbe instead: it exits 0 once the Lease shows
// the grant renewed.
func runAgent(args []string) error {
	fs := flag.NewFlagSet("agent", flag.ExitOnError)
	probe := fs.Bool("probe", false, "Answer the startupProbe: succeed once the grant was renewed, then exit.")
	var opts holder.AgentOptions
	fs.StringVar(&opts.StateFile, "state-file", fencingv1.AgentStateFile,
		"Where to keep the agent's view of the grant for the workload (JSON: state, token, local deadline); empty for none.")
	fs.StringVar(&opts.Listen, "state-address", fencingv1.AgentStateAddress,
		"Localhost address whose /state answers with the same JSON; empty for none.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := zap.New(zap.UseFlagOptions(&zapOpts)).WithName("agent")
	cfg, err := holder.Config{}.FromEnv()
	if err != nil {
		return err
	}
	rest, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	// A renewal is the only request: protobuf makes it the cheapest the API server gets.
	rest.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(rest)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	cfg.Leases = cs.CoordinationV1()
	if *probe {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second) // within the probe's timeout
		defer cancel()
		return holder.Probe(ctx, cfg)
	}
	return holder.RunAgent(ctrl.SetupSignalHandler(), cfg, opts, log)
}
