package bench

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlease/fencedlease/hack/manifest"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// With -bench.apf the API server treats each side's requests as a cluster would: the
// holders, client-go's candidates and the operator act as service accounts (a cluster
// admin's client certificate, impersonating), not as system:masters, whose requests API
// Priority and Fairness exempts from every limit and queue; and the shipped FlowSchemas
// (config/apf) are installed. So a renewal — pkg/holder's or client-go's leader's, both
// match fencedlease-lease-renewals — waits in the leader-election priority level, apart
// from the operator's failover writes in workload-high, as issue 23 item 2 intends.

// installAPF creates the shipped FlowSchemas, and lets every service account do anything
// (RBAC is not what is measured; the bench installs no admission policy either).
func installAPF(ctx context.Context, c client.Client) error {
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "apf", "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		objs, err := manifest.Read(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	return c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-service-accounts"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:serviceaccounts"}},
	})
}

// asWorkloads makes cfg's Lease requests come from one service account per lock, as the
// pods of a thousand singleton workloads would (each workload its own account, shared by
// its replicas): system:serviceaccount:NS:lease-NAME for a request on Lease NS/NAME,
// NS's default for one on no single Lease (a create, a list, a watch). Without -bench.apf
// it returns cfg as it is.
func asWorkloads(cfg *rest.Config) *rest.Config {
	if !*apf {
		return cfg
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return leaseServiceAccounts{rt} })
	return cfg
}

type leaseServiceAccounts struct{ rt http.RoundTripper }

func (l leaseServiceAccounts) RoundTrip(r *http.Request) (*http.Response, error) {
	// apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME]
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 6 || parts[3] != "namespaces" || parts[5] != "leases" {
		return l.rt.RoundTrip(r)
	}
	ns, account := parts[4], "default"
	if len(parts) > 6 {
		account = "lease-" + parts[6]
	}
	r = r.Clone(r.Context()) // a RoundTripper must not change the caller's request
	r.Header.Set(transport.ImpersonateUserHeader, "system:serviceaccount:"+ns+":"+account)
	r.Header[transport.ImpersonateGroupHeader] = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}
	return l.rt.RoundTrip(r)
}

// expectRenewalsClassified fails unless a Lease read through cfg is classified by
// fencedlease-lease-renewals: the API server names the FlowSchema (by UID) in a header.
func expectRenewalsClassified(ctx context.Context, c client.Client, cfg *rest.Config) error {
	fs := &unstructured.Unstructured{}
	fs.SetAPIVersion("flowcontrol.apiserver.k8s.io/v1")
	fs.SetKind("FlowSchema")
	if err := c.Get(ctx, client.ObjectKey{Name: "fencedlease-lease-renewals"}, fs); err != nil {
		return err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	var got string
	// The API server takes up a new FlowSchema within seconds.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + "/apis/coordination.k8s.io/v1/namespaces/default/leases/probe")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if got = resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"); got == string(fs.GetUID()) {
			return nil
		}
	}
	all := &unstructured.UnstructuredList{}
	all.SetAPIVersion("flowcontrol.apiserver.k8s.io/v1")
	all.SetKind("FlowSchemaList")
	name := got
	if c.List(ctx, all) == nil {
		for _, s := range all.Items {
			if string(s.GetUID()) == got {
				name = s.GetName()
			}
		}
	}
	return fmt.Errorf("a holder's Lease read was classified by FlowSchema %s, not fencedlease-lease-renewals", name)
}
