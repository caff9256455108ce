// Package agentcmd is the command line of the pieces that run beside a workload: the
// renewal sidecar (`agent`) and the command wrapper (`hold`). Both the operator's binary
// and the small fencedlease-agent binary serve them from here, so it imports neither
// controller-runtime nor the full clientset: the agent stays a fraction of the operator.
package agentcmd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fencedlease/fencedlease/pkg/holder"
)

// leaseClient connects as kubectl does ($KUBECONFIG, then ~/.kube/config), or with the
// pod's service account inside a cluster.
func leaseClient() (holder.LeaseClients, error) {
	rest, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no Kubernetes configuration (in-cluster, $KUBECONFIG or ~/.kube/config): %w", err)
	}
	// A renewal is the only request: protobuf makes it the cheapest the API server gets.
	rest.ContentType = "application/vnd.kubernetes.protobuf"
	rest.UserAgent = "fencedlease-agent"
	leases, err := newRESTLeases(rest)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return leases, nil
}

// signalContext ends on SIGTERM or SIGINT; a second signal kills as usual.
func signalContext() context.Context {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	go func() { <-ctx.Done(); stop() }()
	return ctx
}

// newLogger writes JSON lines to stderr.
func newLogger(name string) logr.Logger {
	return logr.FromSlogHandler(slog.NewJSONHandler(os.Stderr, nil)).WithName(name)
}
