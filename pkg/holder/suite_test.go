package holder_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

var (
	testEnv *envtest.Environment
	cfg     *rest.Config
	k8s     client.WithWatch
	ctx     = context.Background()
)

func TestHolder(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "pkg/holder against the real controller (envtest)")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	testEnv, cfg, k8s, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(testEnv.Stop)
})

// partition is a holder's network link to the API server, which a spec can cut.
type partition struct {
	cut atomic.Bool
	rt  http.RoundTripper
}

func (p *partition) RoundTrip(r *http.Request) (*http.Response, error) {
	if p.cut.Load() {
		return nil, errors.New("partitioned from the API server")
	}
	return p.rt.RoundTrip(r)
}

// holderClient is the clientset a holder pod would have, over a link the spec can cut.
func holderClient() (*kubernetes.Clientset, *partition) {
	GinkgoHelper()
	link := &partition{}
	c := rest.CopyConfig(cfg)
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { link.rt = rt; return link }
	cs, err := kubernetes.NewForConfig(c)
	Expect(err).NotTo(HaveOccurred())
	return cs, link
}

// grantedNamespace runs a controller in a new namespace with a FencedLease of the given
// duration and pods a and b, and waits until a holds token 1.
func grantedNamespace(durationSeconds int32) string {
	GinkgoHelper()
	ns := controlledNamespace("holder-", fencingv1.FencedLeaseSpec{LeaseDurationSeconds: durationSeconds, StartupDeadlineSeconds: durationSeconds})
	for _, name := range []string{"a", "b"} {
		Expect(k8s.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{fencingv1.LeaseLabel: "invoices"},
				Annotations: map[string]string{fencingv1.StateAnnotation: string(fencingv1.PodWaiting)}}, // as the webhook leaves it
			Spec: corev1.PodSpec{
				SchedulingGates: []corev1.PodSchedulingGate{{Name: fencingv1.SchedulingGate}},
				Containers:      []corev1.Container{{Name: "work", Image: "example.invalid/work"}},
			},
		})).To(Succeed())
	}
	Eventually(func(g Gomega) {
		g.Expect(holderOf(g, ns)).To(Equal("a/1"))
		l := &coordinationv1.Lease{} // G2 done too
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, l)).To(Succeed())
		g.Expect(l.Spec.HolderIdentity).To(HaveValue(Equal("a")))
		g.Expect(l.Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, "1"))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return ns
}

// controlledNamespace creates a namespace with the grant oracle on it, a controller
// watching it and FencedLease "invoices" of spec, and returns its name.
func controlledNamespace(prefix string, spec fencingv1.FencedLeaseSpec) string {
	GinkgoHelper()
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	Expect(k8s.Create(ctx, nsObj)).To(Succeed())
	ns := nsObj.Name
	grants, err := testenv.WatchGrants(ctx, k8s, ns)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		_, err := grants.Stop()
		Expect(err).NotTo(HaveOccurred(), "the grant oracle: never two pods Holding, tokens only rising")
	})
	c, err := testenv.StartController(cfg, ns, testenv.ControllerOptions{Name: "ctrl"})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(c.Stop)
	Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"}, Spec: spec})).To(Succeed())
	return ns
}

// holderOf is "pod/token" of the FencedLease's holder, or "" when there is none.
func holderOf(g Gomega, ns string) string {
	fl := &fencingv1.FencedLease{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, fl)).To(Succeed())
	if fl.Status.Holder == nil {
		return ""
	}
	return fl.Status.Holder.PodName + "/" + itoa(fl.Status.Holder.Token)
}
