package podwebhook_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/config/crd"
	"github.com/fencedlease/fencedlease/controllers/podwebhook"
)

var (
	testEnv *envtest.Environment
	k8s     client.Client
	scheme  = k8sruntime.NewScheme()
	ctx     = context.Background()
	// calls counts requests that reached the webhook.
	calls atomic.Int64
)

const agentImage = "registry.example/fencedlease:test"

func TestPodWebhook(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Pod admission webhook (envtest)")
}

// counting wraps the handler to tell whether the API server called the webhook at all.
type counting struct{ admission.Handler }

func (c counting) Handle(ctx context.Context, req admission.Request) admission.Response {
	calls.Add(1)
	return c.Handler.Handle(ctx, req)
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
		// The shipped webhook configuration, pointed by envtest at the server below.
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join(repoRoot(), "config", "webhook")}},
	}
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(testEnv.Stop)
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	o := &testEnv.WebhookInstallOptions
	srv := webhook.NewServer(webhook.Options{Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir})
	h := &podwebhook.Handler{Reader: k8s, Decoder: admission.NewDecoder(scheme), AgentImage: agentImage}
	srv.Register(podwebhook.Path, &webhook.Admission{Handler: counting{h}})
	srvCtx, stop := context.WithCancel(ctx)
	DeferCleanup(stop)
	go func() {
		defer GinkgoRecover()
		Expect(srv.Start(srvCtx)).To(Succeed())
	}()
	addr := net.JoinHostPort(o.LocalServingHost, fmt.Sprint(o.LocalServingPort))
	Eventually(func() error {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // local test server
		if err == nil {
			conn.Close()
		}
		return err
	}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
})

func assetsDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	matches, _ := filepath.Glob(filepath.Join(repoRoot(), "bin", "k8s", "*"))
	if len(matches) == 0 {
		Fail("no control plane binaries: run 'make envtest' (or 'make test')")
	}
	return matches[len(matches)-1]
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "wh-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}
