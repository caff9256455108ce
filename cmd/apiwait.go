package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Waiting for the API server: a replica that cannot reach it at start waits and retries
// instead of exiting, so a control-plane upgrade does not push it into the kubelet's
// CrashLoopBackOff (10 s doubling to 5 min) and keep it away long after the API is back.
const (
	apiWaitFirst = 250 * time.Millisecond
	apiWaitMax   = 5 * time.Second // the back-off's bound: back within 5 s of the API server
	apiProbe     = 2 * time.Second // one readiness request
)

// newManagerWhenReachable creates the manager once the API server answers, and again
// whenever creating it failed because the API server stopped answering in between. An
// error from a reachable API server (a bad config, a missing CRD) is returned as is.
func newManagerWhenReachable(ctx context.Context, cfg *rest.Config, probeAddr string, opts ctrl.Options) (ctrl.Manager, error) {
	for {
		if err := waitForAPIServer(ctx, cfg, probeAddr); err != nil {
			return nil, err
		}
		mgr, err := ctrl.NewManager(cfg, opts)
		if err == nil || apiServerAnswers(ctx, cfg) == nil {
			return mgr, err
		}
		ctrl.Log.Info("the API server stopped answering while the manager was created; waiting for it again", "error", err.Error())
	}
}

// waitForAPIServer returns nil once the API server answers /readyz, or ctx's error. Until
// then it retries with a bounded back-off, logs each failure, and serves probeAddr itself:
// /healthz answers ok (liveness never depends on the API server) and /readyz does not.
func waitForAPIServer(ctx context.Context, cfg *rest.Config, probeAddr string) error {
	err := apiServerAnswers(ctx, cfg)
	if err == nil {
		return nil
	}
	stop, serveErr := serveWaitingProbes(probeAddr)
	if serveErr != nil {
		return serveErr
	}
	defer stop()
	began := time.Now()
	for delay, attempt := apiWaitFirst, 1; ; attempt++ {
		ctrl.Log.Info("waiting for the API server; not ready until it answers", "attempt", attempt,
			"waited", time.Since(began).Round(time.Millisecond), "retryIn", delay, "error", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		if err = apiServerAnswers(ctx, cfg); err == nil {
			ctrl.Log.Info("the API server answers", "waited", time.Since(began).Round(time.Millisecond))
			return nil
		}
		delay = min(2*delay, apiWaitMax)
	}
}

// apiServerAnswers asks the API server's /readyz once.
func apiServerAnswers(ctx context.Context, cfg *rest.Config) error {
	c := rest.CopyConfig(cfg)
	c.Timeout = apiProbe
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, apiProbe)
	defer cancel()
	_, err = dc.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err
}

// serveWaitingProbes answers the kubelet's probes on addr while the manager, which serves
// them later, does not exist yet. stop closes the listener (the manager binds it next).
func serveWaitingProbes(addr string) (stop func(), err error) {
	if addr == "" || addr == "0" {
		return func() {}, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "waiting for the API server", http.StatusServiceUnavailable)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ctrl.Log.Error(err, "serving the probes while waiting for the API server")
		}
	}()
	return func() { _ = srv.Close(); <-done }, nil
}
