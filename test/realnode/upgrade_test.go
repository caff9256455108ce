package realnode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// testUpgrade: the previous release installed from its bundle (its CRD, its images), a
// holder at work behind its agent sidecar and a pod waiting; then the current bundle
// applied as a user upgrades (kubectl apply --server-side), and the previous one applied
// again (the rollback). Across both, the holder is never revoked and keeps renewing, the
// objects the other version wrote are served, and the next grants continue the tokens.
func testUpgrade(t *testing.T) {
	root := testenv.RepoRoot()
	current := filepath.Join(root, "dist", "install.yaml")
	previous := filepath.Join(os.Getenv(binEnv), "previous", "install.yaml")
	undeployStart := time.Now()
	undeployBundle(t)
	t.Logf("the bundle undeployed in %v", time.Since(undeployStart).Round(100*time.Millisecond))
	install := func(bundle, tag string) time.Duration {
		t.Helper()
		start := time.Now()
		if out, err := kubectl("apply", "--server-side", "--force-conflicts", "-f", bundle); err != nil {
			t.Fatalf("kubectl apply %s: %v\n%s", bundle, err, out)
		}
		if out, err := kubectl("-n", operatorNamespace, "rollout", "status", "deployment/"+operatorDeployment, "--timeout=300s"); err != nil {
			t.Fatalf("the operator (%s) did not roll out: %v\n%s", tag, err, out)
		}
		if err := poll(3*time.Minute, func() bool { return operatorImagesAre(t, "fencedlease:"+tag) }); err != nil {
			t.Fatalf("the operator's pods do not all run fencedlease:%s", tag)
		}
		return time.Since(start)
	}
	install(previous, previousTag)

	const ns, lease, leaseSeconds = "upgrade", "singleton", 4
	newNamespace(t, ns)
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds, StartupDeadlineSeconds: 60}}))
	grants, err := testenvWatch(ns)
	must(t, err)
	candidate := func(name string) {
		pod := workloadPod(ns, name, lease, corev1.Container{Name: "work", Command: []string{"/workload"}})
		pod.Annotations = map[string]string{fencingv1.AgentAnnotation: "true"}
		must(t, rc.Client.Create(ctx, pod))
	}
	candidate("a")
	reportedAt(t, ns, "a", "work", "env=1 file=1", 90*time.Second)
	if img := getPod(t, ns, "a").Spec.InitContainers[0].Image; img != "fencedlease-agent:"+previousTag {
		t.Errorf("the previous operator injected agent %s", img)
	}
	candidate("b")
	holds := func(when, pod string, token, revocations int64) {
		t.Helper()
		fl := getFencedLease(t, ns, lease)
		if fl.Status.Holder == nil || fl.Status.Holder.PodName != pod || fl.Status.Holder.Token != token || fl.Status.Revocations != revocations {
			t.Fatalf("%s: want %s holding token %d, %d revocations; status %+v", when, pod, token, revocations, fl.Status)
		}
		if since := time.Since(lastRenewal(t, ns, lease)); since > leaseSeconds*time.Second {
			t.Fatalf("%s: %s's last renewal was %v ago, over a lease", when, pod, since)
		}
	}

	upgraded := install(current, "dev")
	time.Sleep(2 * leaseSeconds * time.Second)
	holds("after the upgrade", "a", 1, 0)
	if log := logs(t, ns, "a", "work"); strings.Contains(log, "stopped") {
		t.Errorf("the holder's work was stopped by the upgrade:\n%s", log)
	}
	must(t, rc.Client.Delete(ctx, getPod(t, ns, "a")))
	reportedAt(t, ns, "b", "work", "env=2 file=2", 90*time.Second)

	// The rollback as docs/operations.md says: the admission objects the previous release
	// lacks deleted first (kubectl apply leaves them).
	for _, kinds := range [][]string{{"mutatingadmissionpolicybinding,mutatingadmissionpolicy", "fencedlease-candidate"},
		{"validatingadmissionpolicybinding,validatingadmissionpolicy", "fencedlease-candidate-check"}} {
		if out, err := kubectl("delete", kinds[0], kinds[1]); err != nil {
			t.Fatalf("kubectl delete %s %s: %v\n%s", kinds[0], kinds[1], err, out)
		}
	}
	rolledBack := install(previous, previousTag)
	time.Sleep(2 * leaseSeconds * time.Second)
	holds("after the rollback", "b", 2, 0)
	candidate("c")
	must(t, rc.Client.Delete(ctx, getPod(t, ns, "b")))
	reportedAt(t, ns, "c", "work", "env=3 file=3", 90*time.Second)
	measured("upgrade from the previous release and rollback (kubectl apply → rolled out)",
		"%v / %v, holder kept, no revocation, tokens 1, 2, 3", upgraded.Round(time.Second), rolledBack.Round(time.Second))
	if _, err := grants.Stop(); err != nil {
		t.Errorf("grant oracle: %v", err)
	}
}

// operatorImagesAre: every operator pod, none terminating, runs image.
func operatorImagesAre(t *testing.T, image string) bool {
	pods, err := clientset(t).CoreV1().Pods(operatorNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "control-plane=controller-manager"})
	if err != nil || len(pods.Items) == 0 {
		return false
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Spec.Containers[0].Image != image {
			return false
		}
	}
	return true
}
