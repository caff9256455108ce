package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/finalizerwebhook"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestWebhookCertificates: with the webhook bundle's webhook configuration installed, the
// operator provisions its serving certificate, injects the CA, writes the certificate
// from its Secret into its cert dir, and serves TLS for the Service's DNS name; only then
// is it ready, within seconds.
func TestWebhookCertificates(t *testing.T) {
	_, cfg, c := testenv.StartT(t)
	ctx := context.Background()
	const ns = "fencedlease-system"
	t.Setenv("POD_NAMESPACE", ns)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	whc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	bundled(t, webhookBundle, "MutatingWebhookConfiguration", whc)
	empty := &corev1.Secret{}
	bundled(t, webhookBundle, "Secret", empty)
	for _, obj := range []client.Object{whc, empty} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	var o webhookOptions
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	o.bind(fs) // the operator's own defaults: names as config/webhook-install deploys them
	port, probes := freePort(t), freePort(t)
	if err := fs.Parse([]string{"--webhook=true", "--agent-image=agent:test", fmt.Sprint("--webhook-port=", port), "--webhook-cert-dir=" + t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: fmt.Sprint("127.0.0.1:", probes),
		WebhookServer:          webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: o.port, CertDir: o.certDir}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := setupWebhook(mgr, o); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() { stop(); <-done }()

	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	secret := &corev1.Secret{}
	if err := wait.PollUntilContextCancel(wctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if c.Get(ctx, client.ObjectKey{Namespace: ns, Name: o.secretName}, secret) != nil {
			return false, nil
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(whc), whc); err != nil {
			return false, err
		}
		injected := len(secret.Data["ca.crt"]) > 0
		for _, w := range whc.Webhooks { // the pod webhook and the FencedLease webhook
			injected = injected && string(w.ClientConfig.CABundle) == string(secret.Data["ca.crt"])
		}
		return injected, nil
	}); err != nil {
		t.Fatalf("no certificate Secret with its CA injected into every webhook of %s: %v", whc.Name, err)
	}

	// The operator writes the Secret's certificate into its cert dir itself (no Secret
	// volume to wait for): ready within seconds of starting.
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	if err := wait.PollUntilContextCancel(rctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", probes))
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("not ready within 20 s of starting: %v", err)
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(secret.Data["ca.crt"])
	conn, err := tls.Dial("tcp", fmt.Sprint("127.0.0.1:", port), &tls.Config{RootCAs: roots, ServerName: "fencedlease-webhook-service.fencedlease-system.svc"})
	if err != nil {
		t.Fatalf("the webhook does not serve a certificate the injected CA vouches for: %v", err)
	}
	conn.Close()
	finalizerAdded(t, roots, port)
}

// finalizerAdded asks the operator's FencedLease webhook about a new FencedLease, as the
// API server would, and expects the finalizer's patch.
func finalizerAdded(t *testing.T, roots *x509.CertPool, port int) {
	t.Helper()
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"CREATE",
		"object":{"apiVersion":"fencing.fencedlease.io/v1alpha1","kind":"FencedLease","metadata":{"name":"invoices","namespace":"ns"}}}}`
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "fencedlease-webhook-service.fencedlease-system.svc"}}}
	resp, err := hc.Post(fmt.Sprintf("https://127.0.0.1:%d%s", port, finalizerwebhook.Path), "application/json", strings.NewReader(review))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(resp.Body).Decode(answer); err != nil {
		t.Fatal(err)
	}
	if r := answer.Response; r == nil || !r.Allowed || !strings.Contains(string(r.Patch), fencingv1.Finalizer) {
		t.Fatalf("the operator's FencedLease webhook answered %+v, want its finalizer patched in", r)
	}
}

// The two bundles: the default, and the webhook component's for Kubernetes 1.30–1.35.
const (
	defaultBundle = "install.yaml"
	webhookBundle = "install-webhook.yaml"
)

// bundled reads the one object of kind in dist/bundle into into.
func bundled(t *testing.T, bundle, kind string, into client.Object) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "dist", bundle))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		if strings.Contains(doc, "\nkind: "+kind+"\n") || strings.HasPrefix(doc, "kind: "+kind+"\n") {
			if err := yaml.Unmarshal([]byte(doc), into); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("dist/%s has no %s", bundle, kind)
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
