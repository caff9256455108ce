package realnode

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// testPostgresRestart: PostgreSQL crashes (an immediate stop) while the holder writes
// through the SQL fence, and the grant moves while it is down: the holder is revoked on
// request and kept running (KeepPod), still writing token 1 (WRITE_ALWAYS); the next pod
// is granted token 2. Both writers' writes fail clearly while the server is down. When it
// is back, writes resume; once token 2 wrote, token 1 is refused; the fence never accepted
// a write of a token below one it accepted before.
func testPostgresRestart(t *testing.T) {
	const ns, lease, leaseSeconds = "pgrestart", "writer", 4
	newNamespace(t, ns)
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds, StartupDeadlineSeconds: 60, RevocationPolicy: fencingv1.KeepPodPolicy}}))
	grants, err := testenvWatch(ns)
	must(t, err)
	pg, dsn, db := fencedDatabaseServer(t, "pgrestart")
	for _, name := range []string{"writer-1", "writer-2"} {
		pod := workloadPod(ns, name, lease, corev1.Container{Name: "work", Command: []string{"/workload"},
			Env: []corev1.EnvVar{{Name: "LEDGER_DSN", Value: dsn}, {Name: "WRITE_ALWAYS", Value: "1"}}})
		pod.Annotations = map[string]string{fencingv1.AgentAnnotation: "true"}
		must(t, rc.Client.Create(ctx, pod))
		time.Sleep(50 * time.Millisecond) // writer-1 is the older
	}
	reportedAt(t, ns, "writer-1", "work", "wrote token 1", 90*time.Second)

	pg.Stop()
	down := time.Now()
	failedAt := loggedWithPrefix(t, ns, "writer-1", "write error: ", 30*time.Second)
	fl := getFencedLease(t, ns, lease)
	patch := client.MergeFrom(fl.DeepCopy())
	fl.Annotations = map[string]string{fencingv1.RevokeAnnotation: "1"}
	must(t, rc.Client.Patch(ctx, fl, patch))
	if err := poll(90*time.Second, func() bool {
		h := getFencedLease(t, ns, lease).Status.Holder
		return h != nil && h.PodName == "writer-2" && h.FirstRenewTime != nil
	}); err != nil {
		t.Fatalf("writer-2 was not granted while the database was down: %+v", getFencedLease(t, ns, lease).Status)
	}
	loggedWithPrefix(t, ns, "writer-2", "write error: ", 30*time.Second)
	restarted := time.Now()
	downFor := restarted.Sub(down)
	pg.Start()
	resumed := reportedAt(t, ns, "writer-2", "work", "wrote token 2", time.Minute)
	reportedAt(t, ns, "writer-1", "work", "REJECTED token 1", time.Minute)
	if tokens := fencedWrites(t, db); len(tokens) == 0 || tokens[len(tokens)-1] != 2 {
		t.Errorf("accepted tokens %v: want token 2's writes last", tokens)
	}
	measured("PostgreSQL crashed under the SQL fence (grant moved meanwhile): restart → token 2 writes; token 1 refused",
		"%v (restart included; writes failed from %v after the crash; down %v)", resumed.Sub(restarted).Round(10*time.Millisecond),
		failedAt.Sub(down).Round(10*time.Millisecond), downFor.Round(100*time.Millisecond))
	if _, err := grants.Stop(); err != nil {
		t.Errorf("grant oracle: %v", err)
	}
}

// loggedWithPrefix is when a workload container first printed a line starting with prefix.
func loggedWithPrefix(t *testing.T, ns, pod, prefix string, timeout time.Duration) time.Time {
	t.Helper()
	var at time.Time
	err := poll(timeout, func() bool {
		for _, m := range reportLine.FindAllStringSubmatch(logs(t, ns, pod, "work"), -1) {
			if strings.HasPrefix(m[2], prefix) {
				n, _ := strconv.ParseInt(m[1], 10, 64)
				at = time.Unix(0, n)
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("%s never logged a line starting %q within %v:\n%s", pod, prefix, timeout, logs(t, ns, pod, "work"))
	}
	return at
}
