package fencedlease_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/config/crd"
	"github.com/fencedlease/fencedlease/controllers/fencedlease"
)

var (
	testEnv *envtest.Environment
	cfg     *rest.Config
	scheme  = k8sruntime.NewScheme()
	// k8s reads and writes straight to the API server: assertions never see a cache.
	k8s client.WithWatch
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "FencedLease controller (envtest)")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(fencingv1.AddToScheme(scheme)).To(Succeed())

	crds, err := crd.Objects()
	Expect(err).NotTo(HaveOccurred())
	testEnv = &envtest.Environment{
		CRDInstallOptions:     envtest.CRDInstallOptions{CRDs: crds},
		BinaryAssetsDirectory: assetsDir(),
	}
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// assetsDir is KUBEBUILDER_ASSETS, or the folder `make envtest` builds into.
func assetsDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	_, file, _, _ := runtime.Caller(0)
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(file), "..", "..", "bin", "k8s", "*"))
	if len(matches) == 0 {
		Fail("no control plane binaries: run 'make envtest' (or 'make test')")
	}
	return matches[len(matches)-1]
}

// controllerOpts shape one controller manager started by a spec.
type controllerOpts struct {
	leaderElection bool
	id             string
	// registry receives the controller's metrics when set.
	registry *prometheus.Registry
}

// startController runs a controller manager that sees only namespace ns, as a separate
// process would, and returns its manager and a stop function that waits for it to end.
// Stopping without releasing leadership is how a crash looks to the others.
func startController(ns string, o controllerOpts) (ctrl.Manager, func()) {
	GinkgoHelper()
	return startControllerOn(cfg, ns, o)
}

// startControllerOn is startController against another API server.
func startControllerOn(cfg *rest.Config, ns string, o controllerOpts) (ctrl.Manager, func()) {
	GinkgoHelper()
	byObject := fencedlease.CacheByObject()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		Cache:                   cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}, ByObject: byObject},
		Controller:              config.Controller{SkipNameValidation: ptr.To(true)},
		LeaderElection:          o.leaderElection,
		LeaderElectionID:        "fencedlease-operator",
		LeaderElectionNamespace: ns,
		LeaseDuration:           ptr.To(2 * time.Second),
		RenewDeadline:           ptr.To(1500 * time.Millisecond),
		RetryPeriod:             ptr.To(200 * time.Millisecond),
		Logger:                  logf.Log.WithName(o.id),
	})
	Expect(err).NotTo(HaveOccurred())
	r := &fencedlease.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("fencedlease-controller"),
		Clock:     clock.RealClock{},
	}
	if o.registry != nil {
		r.Metrics = fencedlease.NewMetrics(o.registry)
	}
	Expect(r.SetupWithManager(mgr)).To(Succeed())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		Eventually(done).WithTimeout(30 * time.Second).Should(BeClosed())
	}
	DeferCleanup(stop)
	return mgr, stop
}

// newNamespace creates a namespace of the spec's own.
func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fl-"}}
	Expect(k8s.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}
