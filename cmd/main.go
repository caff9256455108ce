// Command fencedlease runs the FencedLease operator; with `agent`, the renewal sidecar;
// with `hold -- CMD`, CMD while the pod holds its grant (both also in the small
// fencedlease-agent binary, cmd/agent).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/fencedlease/fencedlease/controllers/admissioncheck"
	"github.com/fencedlease/fencedlease/controllers/fencedlease"
	"github.com/fencedlease/fencedlease/internal/agentcmd"
)

func main() {
	if code, ran := agentcmd.Run(os.Args[1:]); ran {
		os.Exit(code)
	}
	if err := runManager(); err != nil {
		fmt.Fprintln(os.Stderr, "fencedlease:", err)
		os.Exit(1)
	}
}

type options struct {
	metricsAddr, probeAddr string
	pprofAddr              string
	metrics                metricsOptions
	gracefulShutdown       time.Duration
	leader                 leaderOptions
	concurrency            int
	qps                    float64
	burst                  int
	localControlPlane      string
	localAssets            string
	localKubeconfig        string
	webhook                webhookOptions
}

func runManager() error {
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address of the Prometheus metrics endpoint; 0 disables it.")
	o.metrics.bind(flag.CommandLine)
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "",
		"Address of Go's /debug/pprof endpoints (heap and CPU profiles), unauthenticated: bind it to 127.0.0.1 and reach it with kubectl port-forward. Empty disables it.")
	flag.DurationVar(&o.gracefulShutdown, "graceful-shutdown-timeout", 20*time.Second,
		"How long the manager waits, on SIGTERM, for in-flight reconciles to finish before it releases leadership and exits; keep the pod's terminationGracePeriodSeconds longer.")
	o.leader.bind(flag.CommandLine)
	flag.IntVar(&o.concurrency, "max-concurrent-reconciles", fencedlease.DefaultConcurrency,
		"How many FencedLeases are reconciled at once (one is never reconciled twice at once). A reconcile mostly waits on the API server, so a mass failover needs several in flight to use its write rate; too many take the server from the holders' renewals, and a holder that cannot renew is one more failover.")
	flag.Float64Var(&o.qps, "kube-api-qps", 2000,
		"Client-side limit of requests per second to the API server. A mass failover costs about six writes per FencedLease, so the default leaves the limit to the server's own priority and fairness.")
	flag.IntVar(&o.burst, "kube-api-burst", 4000, "Client-side burst above --kube-api-qps.")
	flag.StringVar(&o.localControlPlane, "local-control-plane", "never",
		"Start an embedded kube-apiserver and etcd: 'never', 'always', or 'auto' (only when no cluster is configured).")
	flag.StringVar(&o.localAssets, "local-control-plane-assets", os.Getenv("KUBEBUILDER_ASSETS"),
		"Folder holding the kube-apiserver and etcd binaries (make envtest builds them).")
	flag.StringVar(&o.localKubeconfig, "local-kubeconfig", "bin/local.kubeconfig",
		"Where to write a kubeconfig for the embedded control plane.")
	o.webhook.bind(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if err := o.leader.validate(); err != nil {
		return err
	}
	if soft, err := memoryLimitFromEnv(); err != nil {
		return err
	} else if soft > 0 {
		ctrl.Log.Info("Go memory limit set from the container's", "bytes", soft, "share", goMemoryShare)
	}
	ctx := ctrl.SetupSignalHandler()
	cfg, lcp, err := restConfig(o)
	if err != nil {
		return err
	}
	if lcp != nil {
		defer lcp.stop()
		// The embedded API server admits candidates itself; with --webhook it calls the
		// webhooks back on this machine too.
		o.webhook.serveLocally(lcp.webhook)
	}

	// The client's defaults (20 per second) would take minutes over a mass failover.
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst

	scheme := fencedlease.NewScheme()
	// The process's own manager serves what must not blink when leadership changes — the
	// webhook, metrics, probes — and, unelected, runs the controller too. Elected, a
	// campaign runs the controller in candidacies of their own (cmd/campaign.go).
	grace := o.gracefulShutdown
	if o.leader.enabled {
		grace += 5 * time.Second // the campaign's candidacy waits its own grace period first
	}
	mgr, err := newManagerWhenReachable(ctx, cfg, o.probeAddr, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 o.metrics.server(o.metricsAddr),
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		GracefulShutdownTimeout: &grace,
		Cache:                   fencedlease.CacheOptions(),
		WebhookServer:           webhook.NewServer(webhook.Options{Host: o.webhook.host, Port: o.webhook.port, CertDir: o.webhook.certDir}),
	})
	if errors.Is(err, context.Canceled) {
		return nil // stopped (SIGTERM) while waiting for the API server
	}
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := setupWebhook(mgr, o.webhook); err != nil {
		return err
	}
	w := work{
		memory:       fencedlease.NewMemory(clock.RealClock{}),
		metrics:      fencedlease.NewMetrics(metrics.Registry),
		checkMetrics: admissioncheck.NewMetrics(metrics.Registry),
		concurrency:  o.concurrency,
		agentImage:   o.webhook.agentImage,
	}
	if o.webhook.enabled {
		w.podWebhook = o.webhook.configuration
	}
	if o.leader.enabled {
		campaign, err := newCampaign(cfg, scheme, o, w)
		if err != nil {
			return err
		}
		if err := mgr.Add(manager.RunnableFunc(campaign.Run)); err != nil {
			return err
		}
	} else if err := w.setup(mgr, fencedlease.Options{Unelected: true}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting manager", "leaderElection", o.leader.enabled)
	return mgr.Start(ctx)
}

// restConfig finds the cluster, or starts the embedded control plane when asked to (then
// lcp is not nil, and the caller must stop it).
func restConfig(o options) (cfg *rest.Config, lcp *localControlPlane, err error) {
	local := false
	switch o.localControlPlane {
	case "never":
	case "auto":
		local = !clusterConfigured()
		if local {
			fmt.Fprintln(os.Stderr, "fencedlease: no cluster configured (no KUBECONFIG, ~/.kube/config or in-cluster service); starting an embedded control plane")
		}
	case "always":
		local = true
	default:
		return nil, nil, errors.New("--local-control-plane must be never, always or auto")
	}
	if local {
		lcp, err = startLocalControlPlane(o.localAssets, o.localKubeconfig, o.webhook.enabled)
		if err != nil {
			return nil, nil, err
		}
		return lcp.cfg, lcp, nil
	}
	cfg, err = ctrl.GetConfig()
	return cfg, nil, err
}

// clusterConfigured tells whether ctrl.GetConfig has anything to find, without its
// error log when there is nothing.
func clusterConfigured() bool {
	if os.Getenv("KUBECONFIG") != "" || os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		return true
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(home, ".kube", "config"))
	return err == nil
}
