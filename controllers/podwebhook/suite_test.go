package podwebhook_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/fencedlease/fencedlease/controllers/finalizerwebhook"
	"github.com/fencedlease/fencedlease/controllers/podwebhook"
	"github.com/fencedlease/fencedlease/test/testenv"
)

var (
	testEnv *envtest.Environment
	k8s     client.Client
	scheme  = testenv.Scheme()
	ctx     = context.Background()
	// calls counts requests that reached the webhook.
	calls atomic.Int64
)

const agentImage = "registry.example/fencedlease:test"

func TestPodWebhook(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "The webhook component: pod and FencedLease webhooks (envtest)")
}

// counting wraps the handler to tell whether the API server called the webhook at all.
type counting struct{ admission.Handler }

func (c counting) Handle(ctx context.Context, req admission.Request) admission.Response {
	calls.Add(1)
	return c.Handler.Handle(ctx, req)
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	testEnv, err = testenv.New()
	Expect(err).NotTo(HaveOccurred())
	// The shipped webhook configuration, pointed by envtest at the server below.
	testEnv.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: []string{filepath.Join(testenv.RepoRoot(), "config", "webhook")}}
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(testEnv.Stop)
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	h, err := podwebhook.NewHandler(scheme, agentImage)
	Expect(err).NotTo(HaveOccurred())
	srvCtx, stop := context.WithCancel(ctx)
	DeferCleanup(stop)
	_, err = testenv.ServeWebhook(srvCtx, &testEnv.WebhookInstallOptions, map[string]*webhook.Admission{
		podwebhook.Path:       {Handler: counting{h}},
		finalizerwebhook.Path: {Handler: finalizerwebhook.Handler{}},
	})
	Expect(err).NotTo(HaveOccurred())
})

func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "wh-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}
