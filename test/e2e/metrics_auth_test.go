package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fencedlease/fencedlease/test/testenv"
)

// TestMetricsAreServedOnlyToAuthorizedScrapers runs the operator binary with its default
// /metrics (HTTPS, TokenReview and SubjectAccessReview against the API server) and the
// bundle's RBAC: no token gets 401, a service account without the metrics-reader role 403,
// one bound to it the page; and the operator's own role allows the two reviews.
func TestMetricsAreServedOnlyToAuthorizedScrapers(t *testing.T) {
	dir := t.TempDir()
	env, cfg, c := testenv.StartT(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)

	objs, err := testenv.BundleObjects()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if slices.Contains([]string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"}, o.GetKind()) {
			if err := c.Create(ctx, o); err != nil {
				t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}
	// The API server's RBAC authorizer learns of new bindings from its own informers, a
	// moment after they are created: asked at once on a loaded machine, it may not know
	// them yet.
	for _, res := range []authorizationv1.ResourceAttributes{
		{Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create"},
		{Group: "authorization.k8s.io", Resource: "subjectaccessreviews", Verb: "create"},
	} {
		allowed := func() bool {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: testenv.OperatorUser, Groups: []string{"system:serviceaccounts", "system:authenticated"}, ResourceAttributes: &res}}
			if err := c.Create(ctx, sar); err != nil {
				t.Fatal(err)
			}
			return sar.Status.Allowed
		}
		if !testenv.Until(10*time.Second, allowed) {
			t.Errorf("the bundle's operator role does not allow %s %s: the /metrics filter would refuse every scrape", res.Verb, res.Resource)
		}
	}

	token := func(name string) string {
		t.Helper()
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
		if err := c.Create(ctx, sa); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	scraper, stranger := token("scraper"), token("stranger")
	if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "fencedlease-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "default", Name: "scraper"}},
	}); err != nil {
		t.Fatal(err)
	}

	bin := testenv.BuildOperator(t, dir)
	m := testenv.StartManager(t, env, bin, dir, "operator", "--leader-elect=false", "--webhook=false",
		"--health-probe-bind-address=0", "--metrics-secure=true")
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // the operator's certificate is self-signed
		ForceAttemptHTTP2: true,
	}}
	get := func(bearer string) (*http.Response, string, error) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+m.MetricsAddr+"/metrics", nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, string(body), err
	}
	testenv.WaitFor(t, 60*time.Second, "/metrics to answer over HTTPS", func() bool { _, _, err := get(""); return err == nil })

	for _, tc := range []struct {
		who    string
		bearer string
		want   int
	}{{"no token", "", http.StatusUnauthorized}, {"a token that is not one", "forged", http.StatusUnauthorized},
		{"a service account without the role", stranger, http.StatusForbidden}, {"the scraper", scraper, http.StatusOK}} {
		resp, body, err := get(tc.bearer)
		if err != nil {
			t.Fatalf("%s: %v", tc.who, err)
		}
		if resp.StatusCode != tc.want {
			t.Errorf("%s: HTTP %d, want %d", tc.who, resp.StatusCode, tc.want)
		}
		if resp.ProtoMajor != 1 {
			t.Errorf("%s: served over %s; HTTP/2 should be off by default", tc.who, resp.Proto)
		}
		if tc.want == http.StatusOK && !strings.Contains(body, "fencedlease_admission_policy_ready") {
			t.Errorf("the scraper's page lacks the operator's series:\n%.500s", body)
		}
		if tc.want != http.StatusOK && strings.Contains(body, "fencedlease_") {
			t.Errorf("%s was shown metrics", tc.who)
		}
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + m.MetricsAddr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("/metrics answered plain HTTP")
		}
	}
}
