// Package testenv starts what the envtest suites share: a control plane built from Go
// modules with the CRDs installed, and controller managers scoped to one namespace.
package testenv

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fencedlease/fencedlease/controllers/fencedlease"
	"github.com/fencedlease/fencedlease/controllers/leadership"
	"github.com/fencedlease/fencedlease/test/plane"
)

// Scheme knows the built-in types, CRDs and the FencedLease.
func Scheme() *k8sruntime.Scheme {
	s := fencedlease.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// RepoRoot is the repository's top folder.
func RepoRoot() string { return plane.RepoRoot() }

// AssetsDir is KUBEBUILDER_ASSETS, or the folder `make envtest` builds into.
func AssetsDir() (string, error) { return plane.AssetsDir() }

// New returns an environment with the CRDs; the caller may add to it, then Start it.
func New() (*envtest.Environment, error) { return plane.New() }

// StartT is Start for one test: it fails the test when the control plane cannot start,
// and stops it when the test ends.
func StartT(t testing.TB) (*envtest.Environment, *rest.Config, client.WithWatch) {
	t.Helper()
	env, err := New()
	if err != nil {
		t.Fatal(err)
	}
	cfg, c := StartEnvT(t, env)
	return env, cfg, c
}

// StartEnvT starts env (from New, changed by the caller) for one test: it fails the test
// when the control plane cannot start, stops it when the test ends, and returns its
// config and an uncached client.
func StartEnvT(t testing.TB, env *envtest.Environment) (*rest.Config, client.WithWatch) {
	t.Helper()
	cfg := plane.StartT(t, env)
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c
}

// Restartable lets env's API server be stopped and started again: its serving
// certificate stays in certDir across the restart, and open watches are closed at once on
// shutdown instead of drained.
func Restartable(env *envtest.Environment, certDir string) {
	env.ControlPlane.GetAPIServer().CertDir = certDir
	env.ControlPlane.GetAPIServer().Configure().Set("shutdown-watch-termination-grace-period", "1s")
}

// Start starts a control plane with the CRDs and returns it with an uncached client.
func Start() (*envtest.Environment, *rest.Config, client.WithWatch, error) {
	env, err := New()
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		_ = env.Stop()
		return nil, nil, nil, err
	}
	return env, cfg, c, nil
}

// ControllerOptions shape one controller manager.
type ControllerOptions struct {
	// Name tells this manager's logs apart.
	Name string
	// LeaderElection makes managers sharing a namespace elect one leader (short
	// durations: a 2 s lease, renewed every 200 ms).
	LeaderElection bool
	// Registry receives the controller's metrics when set.
	Registry *prometheus.Registry
	// WrapTransport, when set, wraps the manager's connection to the API server (to
	// count its requests, say).
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// Memory, when set, is handed to the controller: managers given one Memory act as the
	// candidacies of one process.
	Memory *fencedlease.Memory
}

// registerer is Registry, or none (a nil *Registry is not a nil Registerer).
func (o ControllerOptions) registerer() prometheus.Registerer {
	if o.Registry == nil {
		return nil
	}
	return o.Registry
}

// Controller is a running controller manager.
type Controller struct {
	Manager ctrl.Manager
	cancel  context.CancelFunc
	done    chan error
}

// StartController runs a controller manager that sees only namespace ns, as a separate
// process would.
func StartController(cfg *rest.Config, ns string, o ControllerOptions) (*Controller, error) {
	scheme := Scheme()
	if o.WrapTransport != nil {
		cfg = rest.CopyConfig(cfg)
		cfg.Wrap(o.WrapTransport)
	}
	// As the binary: under leader election the leader's writes go through the
	// leadership guard, which refuses them once its leadership is not certain.
	var lock resourcelock.Interface
	var guard *leadership.Guard
	const renewDeadline = 1500 * time.Millisecond
	if o.LeaderElection {
		var err error
		if lock, guard, err = leadership.NewLock(cfg, ns, "fencedlease-operator", o.Name+"_"+string(uuid.NewUUID()), renewDeadline, nil); err != nil {
			return nil, err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                              scheme,
		Metrics:                             metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:              "0",
		Cache:                               cacheOptions(ns),
		Controller:                          config.Controller{SkipNameValidation: ptr.To(true)},
		LeaderElection:                      o.LeaderElection,
		LeaderElectionResourceLockInterface: lock,
		LeaseDuration:                       ptr.To(2 * time.Second),
		RenewDeadline:                       ptr.To(renewDeadline),
		RetryPeriod:                         ptr.To(200 * time.Millisecond),
		Logger:                              logf.Log.WithName(o.Name),
	})
	if err != nil {
		return nil, err
	}
	// As the binary does: several FencedLeases at once, each key one at a time (and the
	// race detector watching, under make test).
	if _, err := fencedlease.Setup(mgr, fencedlease.Options{
		Guard:                   guard,
		Unelected:               !o.LeaderElection,
		Clock:                   clock.RealClock{},
		Memory:                  o.Memory,
		Metrics:                 fencedlease.NewMetrics(o.registerer()),
		MaxConcurrentReconciles: 4,
	}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Controller{Manager: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- mgr.Start(ctx) }()
	return c, nil
}

// Stop ends the manager without releasing leadership (how a crash looks to the others)
// and waits for it; it returns what Start returned. Calling it again returns nil.
func (c *Controller) Stop() error {
	if c.done == nil {
		return nil
	}
	c.cancel()
	err := <-c.done
	c.done = nil
	return err
}

// cacheOptions are the binary's, seeing only namespace ns.
func cacheOptions(ns string) cache.Options {
	o := fencedlease.CacheOptions()
	o.DefaultNamespaces = map[string]cache.Config{ns: {}}
	return o
}
