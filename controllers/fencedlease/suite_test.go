package fencedlease_test

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fencedlease/fencedlease/controllers/fencedlease"
	"github.com/fencedlease/fencedlease/test/testenv"
)

var (
	testEnv *envtest.Environment
	cfg     *rest.Config
	scheme  = testenv.Scheme()
	// k8s reads and writes straight to the API server: assertions never see a cache.
	k8s client.WithWatch
)

func TestControllers(t *testing.T) {
	t.Parallel()
	RegisterFailHandler(Fail)
	RunSpecs(t, "FencedLease controller (envtest)")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))

	var err error
	testEnv, cfg, k8s, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// controllerOpts shape one controller manager started by a spec.
type controllerOpts struct {
	leaderElection bool
	id             string
	// registry receives the controller's metrics when set.
	registry *prometheus.Registry
	// wrap wraps the manager's connection to the API server.
	wrap func(http.RoundTripper) http.RoundTripper
	// memory is what the controller remembers across the candidacies of one process.
	memory *fencedlease.Memory
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
	c, err := testenv.StartController(cfg, ns, testenv.ControllerOptions{
		Name: o.id, LeaderElection: o.leaderElection, Registry: o.registry, WrapTransport: o.wrap, Memory: o.memory,
	})
	Expect(err).NotTo(HaveOccurred())
	stop := func() { Expect(c.Stop()).To(Succeed()) }
	DeferCleanup(stop)
	return c.Manager, stop
}

// newNamespace creates a namespace of the spec's own, watched until the spec ends by the
// oracle: never two pods Holding at once, tokens only rising.
func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fl-"}}
	Expect(k8s.Create(context.Background(), ns)).To(Succeed())
	watchGrants(ns.Name)
	return ns.Name
}

// watchGrants runs the oracle on ns until the spec ends, and returns it for specs that
// also check the order of tokens.
func watchGrants(ns string) *testenv.GrantWatcher {
	GinkgoHelper()
	gw, err := testenv.WatchGrants(context.Background(), k8s, ns)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		_, err := gw.Stop()
		Expect(err).NotTo(HaveOccurred(), "the grant oracle")
	})
	return gw
}
