package outages

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestTheOperatorStartsWithoutTheAPIServer starts the binary while the API server is
// down (issue 22, item 1): it must not exit (under a kubelet every exit grows the
// CrashLoopBackOff), must stay live but not ready while it waits, and must grant once the
// API server is back.
func TestTheOperatorStartsWithoutTheAPIServer(t *testing.T) {
	dir := t.TempDir()
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	testenv.Restartable(env, t.TempDir())
	_, c := testenv.StartEnvT(t, env)
	apiServer := env.ControlPlane.GetAPIServer()
	bin := testenv.BuildOperator(t, dir)

	if err := apiServer.Stop(); err != nil {
		t.Fatal(err)
	}
	probes := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	m := testenv.StartManager(t, env, bin, dir, "waiting", append(testenv.ReplicaFlags, "--health-probe-bind-address="+probes)...)
	status := func(path string) int {
		resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + probes + path)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	testenv.WaitFor(t, 30*time.Second, "the waiting operator to answer its liveness probe", func() bool { return status("/healthz") == http.StatusOK })
	if code := status("/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz answered %d while the API server is down, want 503", code)
	}
	time.Sleep(3 * time.Second) // several of its retries
	if m.Exited() {
		t.Fatalf("the operator exited while the API server was down:\n%s", m.Stderr.String())
	}
	if !strings.Contains(m.Stderr.String(), "waiting for the API server") {
		t.Fatalf("the operator does not say it waits for the API server:\n%s", m.Stderr.String())
	}

	if err := apiServer.Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	testenv.WaitFor(t, 30*time.Second, "the operator to lead", m.Leading)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "late"}}); err != nil {
		t.Fatal(err)
	}
	fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: "late", Name: "invoices"}}
	if err := c.Create(ctx, fl); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, testenv.CandidatePod("late", "p", "invoices")); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "a grant after the API server came back", func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(fl), fl) == nil && fl.Status.Holder != nil && fl.Status.Holder.Token == 1
	})
	t.Logf("API server back → leading and granted in %v", time.Since(back).Round(time.Millisecond))
	if m.Exited() {
		t.Fatal("the operator exited")
	}
	testenv.WaitFor(t, 10*time.Second, "/readyz to pass", func() bool { return status("/readyz") == http.StatusOK })
}
