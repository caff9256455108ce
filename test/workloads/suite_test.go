// Package workloads runs the operator against a small real cluster (test/cluster): the
// real scheduler and controller-manager, kwok nodes, and candidates admitted by the shipped
// admission policies, as the default install admits them (no webhook).
package workloads

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fencedlease/fencedlease/test/cluster"
	"github.com/fencedlease/fencedlease/test/testenv"
)

var (
	ctx = context.Background()
	cl  *cluster.Cluster
	// k8s reads and writes uncached, as the test's own admin.
	k8s client.WithWatch
)

const (
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
)

func TestWorkloads(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Workloads on a real scheduler, controller-manager and kwok nodes")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	env, err := testenv.New()
	Expect(err).NotTo(HaveOccurred())
	// A node silent for 10s is NotReady: the node-failure spec need not wait 40s.
	cl, err = cluster.Start(cluster.Options{Env: env, Nodes: 2, NodeMonitorGracePeriod: 10 * time.Second})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		GinkgoWriter.Printf("component logs: %s\n", cl.Logs())
		Expect(cl.Stop()).To(Succeed())
	})
	k8s, err = client.NewWithWatch(cl.Config, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())

	// As the default install admits candidates: the API server alone, no webhook.
	Expect(testenv.InstallCandidateAdmission(ctx, k8s)).To(Succeed())
})

// newNamespace creates a namespace with the operator watching it and the grant oracle on it.
func newNamespace() string {
	GinkgoHelper()
	ns, _ := newWatchedNamespace()
	return ns
}

// newWatchedNamespace is newNamespace, also returning the oracle, whose Stop tells the
// tokens in the order their pods became Holding.
func newWatchedNamespace() (string, *testenv.GrantWatcher) {
	GinkgoHelper()
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "wl-"}}
	Expect(k8s.Create(ctx, nsObj)).To(Succeed())
	grants, err := testenv.WatchGrants(ctx, k8s, nsObj.Name)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		_, err := grants.Stop()
		Expect(err).NotTo(HaveOccurred(), "the grant oracle: never two pods Holding, tokens only rising")
	})
	c, err := testenv.StartController(cl.Config, nsObj.Name, testenv.ControllerOptions{Name: "operator"})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(c.Stop()).To(Succeed()) })
	return nsObj.Name, grants
}
