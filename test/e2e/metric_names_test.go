package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/fence"
	"github.com/fencedlease/fencedlease/pkg/holder"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestAlertsAndDashboardReadExportedMetrics checks every metric name that the alert rules
// and the dashboard read (config/prometheus/metric-names.txt, written by hack/rulecheck)
// against what is really exported: the operator binary on its embedded control plane with
// leader election and the pod webhook, scraped after a grant and a webhook rejection; that
// control plane's kube-apiserver; a pkg/holder holder and a pkg/fence store, gathered
// after a renewal and a stale write.
func TestAlertsAndDashboardReadExportedMetrics(t *testing.T) {
	want := readNames(t, filepath.Join(testenv.RepoRoot(), "config", "prometheus", "metric-names.txt"))
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := testenv.BuildOperator(t, dir)
	kubeconfig := filepath.Join(dir, "local.kubeconfig")
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	var stderr testenv.LockedBuffer
	// --webhook: the webhook install's series, which the webhook alerts read, exist once it answers.
	cmd := exec.Command(bin, "--local-control-plane=always", "--leader-elect=true", "--leader-election-namespace=default", "--webhook=true",
		"--metrics-bind-address="+metricsAddr, "--metrics-secure=false", "--health-probe-bind-address=0",
		"--local-control-plane-assets="+assets, "--local-kubeconfig="+kubeconfig)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// SIGTERM: the binary stops its embedded control plane (a kill would orphan it).
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			out := stderr.String()
			t.Logf("operator stderr (tail):\n%s", out[max(0, len(out)-3000):])
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var cfg *rest.Config
	testenv.WaitFor(t, 60*time.Second, "the embedded control plane's kubeconfig", func() bool {
		raw, err := os.ReadFile(kubeconfig)
		if err == nil {
			cfg, err = clientcmd.RESTConfigFromKubeConfig(raw)
		}
		return err == nil
	})
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	// A grant through the webhook, and a pod the webhook refuses (it brings its own token).
	fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "invoices"}}
	testenv.WaitFor(t, 60*time.Second, "the CRD", func() bool { return c.Create(ctx, fl) == nil })
	// A FencedLease with slots: the only kind with fencedlease_slots series.
	shards := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shards"}, Spec: fencingv1.FencedLeaseSpec{Holders: 2}}
	if err := c.Create(ctx, shards); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p1", Labels: map[string]string{fencingv1.LeaseLabel: "invoices"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "work", Image: "example.invalid/work"}}}}
	testenv.WaitFor(t, 60*time.Second, "the webhook to admit a pod", func() bool { return c.Create(ctx, pod.DeepCopy()) == nil })
	forged := pod.DeepCopy()
	forged.Name, forged.Annotations = "p2", map[string]string{fencingv1.TokenAnnotation: "9"}
	if err := c.Create(ctx, forged); err == nil || !strings.Contains(err.Error(), "only the operator grants tokens") {
		t.Fatalf("the webhook admitted a pod bringing its own token: %v", err)
	}
	testenv.WaitFor(t, 60*time.Second, "p1 to be granted", func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(pod), pod) == nil && pod.Annotations[fencingv1.TokenAnnotation] == "1"
	})

	// p1 is granted and has not renewed: its FencedLease is not Ready, the only time
	// fencedlease_not_ready has a series. Scrape it now.
	have := map[string]bool{}
	testenv.WaitFor(t, 60*time.Second, "the not-Ready series of a starting holder", func() bool {
		page, err := scrape("http://" + metricsAddr + "/metrics")
		addNames(have, page)
		return err == nil && have["fencedlease_not_ready"] && have["fencedlease_slots_held"]
	})

	// The holder renews as p1 would: its bound service-account token names the pod (and,
	// this control plane having no RBAC for it, it is an admin: the policies still apply).
	reg := prometheus.NewRegistry()
	cs := kubernetes.NewForConfigOrDie(testenv.AsUser(cfg, "system:serviceaccount:default:default",
		[]string{"system:serviceaccounts", "system:serviceaccounts:default", "system:masters"},
		map[string][]string{"authentication.kubernetes.io/pod-name": {pod.Name}, "authentication.kubernetes.io/pod-uid": {string(pod.UID)}}))
	h, err := holder.Start(ctx, holder.Config{Leases: holder.ClientGo(cs.CoordinationV1()), Namespace: "default", LeaseName: "invoices",
		Identity: pod.Name, Token: 1, Metrics: holder.NewMetrics(reg)})
	if err != nil {
		t.Fatalf("the holder's first renewal: %v", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	store := &fence.MemoryStore{Metrics: fence.NewMetrics(reg)}
	noop := func(context.Context) error { return nil }
	if err := store.Do(ctx, "invoices", 2, noop); err != nil {
		t.Fatal(err)
	}
	if err := store.Do(ctx, "invoices", 1, noop); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("stale write: %v", err)
	}

	testenv.WaitFor(t, 60*time.Second, "the operator to lead", func() bool {
		page, err := scrape("http://" + metricsAddr + "/metrics")
		addNames(have, page)
		return err == nil && strings.Contains(page, "leader_election_master_status{") && have["controller_runtime_webhook_requests_total"]
	})
	raw, err := kubernetes.NewForConfigOrDie(cfg).Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("scraping the API server: %v", err)
	}
	addNames(have, string(raw))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		have[f.GetName()] = true
	}

	for _, name := range want {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if !have[name] && !have[base] {
			t.Errorf("the rules or the dashboard read %s, which nothing exports", name)
		}
	}
	// Every metric of ours that is exported is in the reference.
	reference, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range have {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(base, "fencedlease_") && !strings.Contains(string(reference), "`"+base) {
			t.Errorf("docs/reference.md does not name the metric %s", base)
		}
	}
}

func readNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v: run 'make rules'", err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			names = append(names, line)
		}
	}
	if len(names) == 0 {
		t.Fatalf("%s lists no metric", path)
	}
	return names
}

// addNames adds the name of every sample line of a /metrics page.
func addNames(have map[string]bool, page string) {
	for line := range strings.SplitSeq(page, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			have[line[:i]] = true
		}
	}
}

func scrape(url string) (string, error) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, err = bufio.NewReader(resp.Body).WriteTo(&b)
	return b.String(), err
}
