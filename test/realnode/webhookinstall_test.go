package realnode

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// The webhook component's objects (dist/install-webhook.yaml has them, dist/install.yaml
// not), as docs/operations.md "Upgrade" deletes them when leaving a webhook install.
var webhookObjects = [][]string{
	{"mutatingwebhookconfiguration", "fencedlease-mutating-webhook-configuration"},
	{"-n", operatorNamespace, "service,secret", "fencedlease-webhook-service", "fencedlease-webhook-server-cert"},
	{"-n", operatorNamespace, "rolebinding,role", "fencedlease-webhook-cert-rolebinding", "fencedlease-webhook-cert-role"},
	{"clusterrolebinding,clusterrole", "fencedlease-webhook-cert-clusterrolebinding", "fencedlease-webhook-cert-clusterrole"},
}

// applyBundle applies a bundle as a user does, then runs after (nil: nothing), then waits
// for the operator's rollout; it returns the time from the apply to rolled out.
func applyBundle(t *testing.T, bundle string, after func()) time.Duration {
	t.Helper()
	start := time.Now()
	if out, err := kubectl("apply", "--server-side", "--force-conflicts", "-f", bundle); err != nil {
		t.Fatalf("kubectl apply %s: %v\n%s", bundle, err, out)
	}
	if after != nil {
		after()
	}
	if out, err := kubectl("-n", operatorNamespace, "rollout", "status", "deployment/"+operatorDeployment, "--timeout=300s"); err != nil {
		t.Fatalf("the operator did not roll out from %s: %v\n%s%s", filepath.Base(bundle), err, out, clusterState(operatorNamespace))
	}
	return time.Since(start)
}

// deleteWebhookObjects deletes what a webhook install has beyond the default one, as
// docs/operations.md says, once the default bundle is applied and the API server admits
// candidates with its policies (it loads them asynchronously: deleted before, the webhook
// configuration leaves a moment where nothing gates a labeled pod, which this spec caught).
func deleteWebhookObjects(t *testing.T) {
	t.Helper()
	waitUntilThePolicyAdmits(t)
	for _, o := range webhookObjects {
		args := append([]string{"delete", "--ignore-not-found", "--wait=false"}, o...)
		if out, err := kubectl(args...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// waitUntilThePolicyAdmits probes, as docs/operations.md does, with a server-side dry run
// in kube-system, which the pod webhook skips (and Pod Security does not restrict): a
// gated answer is the mutating policy's.
func waitUntilThePolicyAdmits(t *testing.T) {
	t.Helper()
	probe := func() string {
		out, _ := kubectl("-n", "kube-system", "run", "admission-probe", "--image=probe", "--restart=Never", "--dry-run=server",
			"--labels="+fencingv1.LeaseLabel+"=probe", "-o", "jsonpath={.spec.schedulingGates[*].name}")
		return out
	}
	if err := poll(time.Minute, func() bool { return strings.Contains(probe(), fencingv1.SchedulingGate) }); err != nil {
		t.Fatalf("the API server does not gate a labeled pod with the mutating policy a minute after the apply: %q", probe())
	}
}

// toWebhookInstall switches the cluster to dist/install-webhook.yaml, as a cluster older
// than 1.36 runs it, and returns the time to rolled out (the webhook's certificate
// provisioned, read back through the API and served).
func toWebhookInstall(t *testing.T) time.Duration {
	t.Helper()
	return applyBundle(t, filepath.Join(testenv.RepoRoot(), "dist", "install-webhook.yaml"), nil)
}

// toDefaultInstall switches back from the webhook install: the default bundle, then the
// webhook's objects deleted.
func toDefaultInstall(t *testing.T) time.Duration {
	t.Helper()
	return applyBundle(t, filepath.Join(testenv.RepoRoot(), "dist", "install.yaml"), func() { deleteWebhookObjects(t) })
}
