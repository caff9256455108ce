package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fencedlease/fencedlease/config/crd"
	"github.com/fencedlease/fencedlease/config/policy"
	"github.com/fencedlease/fencedlease/controllers/fencedlease"
)

// cluster is an embedded control plane with the operator running in this process,
// candidates admitted by the API server as in the default install (the mutating admission
// policy and its check; no webhook), and a kubeconfig the pods' processes use.
type cluster struct {
	env        *envtest.Environment
	cfg        *rest.Config
	client     client.WithWatch
	kubeconfig string
	stop       func()
}

func startCluster(o options) (*cluster, error) {
	log.SetLogger(logrDiscard())
	crds, err := crd.Objects()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: o.assets,
		CRDInstallOptions:     envtest.CRDInstallOptions{CRDs: crds},
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the control plane from %q: %w (run 'make envtest')", o.assets, err)
	}
	c := &cluster{env: env, cfg: cfg, stop: func() { _ = env.Stop() }}
	if c.client, err = client.NewWithWatch(cfg, client.Options{Scheme: fencedlease.NewScheme()}); err != nil {
		c.stop()
		return nil, err
	}
	user, err := env.AddUser(envtest.User{Name: "demo-pods", Groups: []string{"system:masters"}}, nil)
	if err == nil {
		var raw []byte
		if raw, err = user.KubeConfig(); err == nil {
			c.kubeconfig = filepath.Join(o.workDir, "kubeconfig")
			err = os.WriteFile(c.kubeconfig, raw, 0o600)
		}
	}
	if err != nil {
		c.stop()
		return nil, err
	}
	if err := c.admitCandidates(); err != nil {
		c.stop()
		return nil, fmt.Errorf("installing the candidate admission policies: %w", err)
	}
	if err := c.startOperator(); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// admitCandidates installs the policies that admit candidate pods, and waits until the
// API server admits with them.
func (c *cluster) admitCandidates() error {
	ctx := context.Background()
	objs, err := policy.CandidateAdmission("system:admin", demoAgentImage)
	if err != nil {
		return err
	}
	if err := policy.Install(ctx, c.client, objs); err != nil {
		return err
	}
	return policy.WaitUntilCandidatesAdmitted(ctx, c.client)
}

// demoAgentImage is never pulled: the demo's pods ask for no agent.
const demoAgentImage = "fencedlease-agent:demo"

// startOperator runs the same controller the operator binary runs.
func (c *cluster) startOperator() error {
	mgr, err := ctrl.NewManager(c.cfg, ctrl.Options{
		Scheme:                 fencedlease.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  fencedlease.CacheOptions(),
	})
	if err != nil {
		return err
	}
	// One operator and no leader election: the binary's controller with --leader-elect=false.
	if _, err := fencedlease.Setup(mgr, fencedlease.Options{Unelected: true, Clock: clock.RealClock{},
		Metrics: fencedlease.NewMetrics(metrics.Registry), MaxConcurrentReconciles: fencedlease.DefaultConcurrency}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "demo: operator:", err)
		}
	}()
	stopEnv := c.stop
	c.stop = func() { cancel(); <-done; stopEnv() }
	return nil
}
