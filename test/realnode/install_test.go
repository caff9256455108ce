package realnode

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// checkInstall checks what an install (the bundle or the chart) promises on a real
// cluster: two replicas on two nodes with one leader, candidates admitted by the API
// server with no webhook installed, metrics served
// through their Service to an authorized scraper only, the PDB and the FlowSchemas in force.
func checkInstall(t *testing.T, ns, prefix string) {
	ctx := context.Background()
	cs := clientset(t)
	// helm --wait and a rollout count a Deployment ready at replicas − maxUnavailable.
	nodes := map[string]string{}
	if err := poll(3*time.Minute, func() bool {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "control-plane=controller-manager"})
		if err != nil {
			return false
		}
		nodes = map[string]string{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && podReady(&p) {
				nodes[p.Spec.NodeName] = p.Name
			}
		}
		return len(nodes) == 2
	}); err != nil {
		t.Errorf("want two ready operator replicas on two nodes, have %v", nodes)
	}

	// One leader, one of the two replicas.
	if err := poll(3*time.Minute, func() bool {
		leases, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, l := range leases.Items {
			for _, pod := range nodes {
				if l.Spec.HolderIdentity != nil && strings.HasPrefix(*l.Spec.HolderIdentity, pod) {
					t.Logf("leader: %s holds Lease %s", pod, l.Name)
					return true
				}
			}
		}
		return false
	}); err != nil {
		t.Errorf("no operator replica holds a leader election Lease in %s", ns)
	}

	// Admission by the API server alone: no webhook configuration or Service, no
	// certificate Secret. A server-side dry run runs the admission policies: a pod
	// bringing its own token is refused by fencedlease-candidate-check, naming the field; a
	// plain labeled pod comes back marked as a candidate, with no FencedLease needed.
	for _, o := range webhookObjects {
		if out, err := kubectl(append([]string{"get", "--ignore-not-found", "-o", "name"}, o...)...); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("the default install has %v: %s %v", o, out, err)
		}
	}
	dryRun := func(annotations ...string) (string, error) {
		args := []string{"-n", "default", "run", "admission-probe", "--image=fencedlease:dev", "--restart=Never",
			"--labels=" + fencingv1.LeaseLabel + "=probe", "--dry-run=server", "-o", "yaml"}
		for _, a := range annotations {
			args = append(args, "--annotations="+a)
		}
		return kubectl(args...)
	}
	if out, err := dryRun(fencingv1.TokenAnnotation + "=99"); err == nil || !strings.Contains(out, "fencedlease-candidate-check") || !strings.Contains(out, fencingv1.TokenAnnotation) {
		t.Errorf("a pod bringing its own token: want fencedlease-candidate-check's refusal naming the annotation, got %v:\n%s", err, out)
	}
	if out, err := dryRun(); err != nil {
		t.Errorf("a labeled pod's server-side dry run: %v\n%s", err, out)
	} else if !strings.Contains(out, fencingv1.StateAnnotation) || !strings.Contains(out, fencingv1.SchedulingGate) {
		t.Errorf("admission did not mark a labeled pod as a candidate (state, gate):\n%s", out)
	}

	// Metrics through the Service, with authentication and authorization.
	svc, err := cs.CoreV1().Services(ns).Get(ctx, prefix+"-controller-manager-metrics-service", metav1.GetOptions{})
	must(t, err)
	url := fmt.Sprintf("https://%s:%d/metrics", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
	reader, stranger := scraperToken(t, ns, "metrics-scraper", prefix+"-metrics-reader"), scraperToken(t, ns, "stranger", "")
	for _, c := range []struct {
		who, token string
		want       int
	}{{"an authorized scraper", reader, 200}, {"no token", "", 401}, {"a service account without the metrics role", stranger, 403}} {
		code, body := scrape(t, url, c.token)
		if code != c.want {
			t.Errorf("%s scraping %s: HTTP %d, want %d", c.who, url, code, c.want)
		}
		if c.want == 200 && !strings.Contains(body, "fencedlease_") {
			t.Errorf("the metrics page holds no fencedlease_ series:\n%.500s", body)
		}
	}

	pdb, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, prefix+"-controller-manager", metav1.GetOptions{})
	must(t, err)
	if err := poll(30*time.Second, func() bool {
		pdb, err = cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, prefix+"-controller-manager", metav1.GetOptions{})
		return err == nil && pdb.Status.CurrentHealthy == 2 && pdb.Status.DisruptionsAllowed == 1
	}); err != nil {
		t.Errorf("PDB: %+v, want 2 healthy and 1 disruption allowed", pdb.Status)
	}
	for _, name := range []string{prefix + "-lease-renewals", prefix + "-operator"} {
		fs, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("FlowSchema %s: %v", name, err)
			continue
		}
		for _, c := range fs.Status.Conditions {
			if c.Type == "Dangling" && c.Status != "False" {
				t.Errorf("FlowSchema %s is dangling: %s", name, c.Message)
			}
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// scraperToken makes a service account, bound to clusterRole unless it is "", and
// returns a token for it.
func scraperToken(t *testing.T, ns, name, clusterRole string) string {
	ctx := context.Background()
	cs := clientset(t)
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() { _ = cs.CoreV1().ServiceAccounts(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	if clusterRole != "" {
		_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
		}, metav1.CreateOptions{})
		must(t, err)
		t.Cleanup(func() {
			_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), ns+"-"+name, metav1.DeleteOptions{})
		})
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	must(t, err)
	return tr.Status.Token
}

// scrape GETs url with a bearer token, retrying while the answer is a transport error
// or a 5xx (an authorization cache warming up), for up to 30 s.
func scrape(t *testing.T, url, token string) (int, string) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		// The metrics endpoint's certificate is the operator's own; its authn/z is what counts here.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var code int
	var body string
	_ = poll(30*time.Second, func() bool {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			code, body = 0, err.Error()
			return false
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code, body = resp.StatusCode, string(raw)
		return code < 500
	})
	return code, body
}
