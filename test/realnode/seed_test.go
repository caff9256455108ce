package realnode

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// testSeedTimeline is the article's timeline in containers: three invoice schedulers from
// the operator's image, each pulled by a kubelet, renewing through pkg/holder and writing
// to PostgreSQL under their token. The holder's container is frozen by the cgroup freezer
// for twice its lease, just before its write; the operator revokes it and grants token 2,
// whose run is written; thawed, the old container writes with token 1 and the ledger
// rejects it. kubectl fencedlease status and history show what happened.
func testSeedTimeline(t *testing.T) {
	const ns, lease, leaseSeconds = "seed", "invoices-tenant-7", 4
	newNamespace(t, ns)
	ctx := context.Background()
	dsn := testenv.StartPostgresOn(t, "198.18.0.1")
	must(t, rc.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ledger"},
		StringData: map[string]string{"dsn": dsn}}))
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds, StartupDeadlineSeconds: 60,
			RevocationPolicy: fencingv1.KeepPodPolicy}}))
	grants, err := testenv.WatchGrants(ctx, rc.Client, ns)
	must(t, err)

	scheduler := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{fencingv1.LeaseLabel: lease}},
			Spec: corev1.PodSpec{
				ServiceAccountName: "worker", RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "scheduler", Image: "fencedlease:dev", Command: []string{"/invoice-scheduler"},
					// Five seconds between the last check of the grant and the write: the
					// window in which the freeze lands.
					Args: []string{"--tenant=tenant-7", "--period=2026-11", "--dsn=$(LEDGER_DSN)", "--work=5s"},
					Env: []corev1.EnvVar{{Name: "LEDGER_DSN", ValueFrom: &corev1.EnvVarSource{
						SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "ledger"}, Key: "dsn"}}}},
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true)},
				}},
			},
		}
	}
	must(t, rc.Client.Create(ctx, scheduler("scheduler-1")))
	waitForLog(t, ns, "scheduler-1", "scheduler", "grant valid; writing", 90*time.Second)
	// Its log can be read before the kubelet's status says the container runs.
	first := startedPod(t, ns, "scheduler-1", "scheduler")
	must(t, rc.Freeze(first, "scheduler"))
	frozen := time.Now()
	renewed := lastRenewal(t, ns, lease)
	t.Logf("froze scheduler-1 (token %s) on %s", first.Annotations[fencingv1.TokenAnnotation], first.Spec.NodeName)
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			must(t, rc.Thaw(getPod(t, ns, "scheduler-1"), "scheduler"))
		}
	}
	t.Cleanup(thaw)
	for _, name := range []string{"scheduler-2", "scheduler-3"} {
		must(t, rc.Client.Create(ctx, scheduler(name)))
		time.Sleep(50 * time.Millisecond) // FIFO: scheduler-2 is the older candidate
	}
	waitForLog(t, ns, "scheduler-2", "scheduler", "invoice run tenant-7/2026-11 created with token 2", 90*time.Second)
	working := loggedAt(t, ns, "scheduler-2", "scheduler", "holding token 2")
	measured("Cold failover to work (last renewal → next pod's process holds)", "%v (lease %ds; pod start included)",
		working.Sub(renewed).Round(10*time.Millisecond), leaseSeconds)
	if held := time.Since(frozen); held < 2*leaseSeconds*time.Second {
		time.Sleep(2*leaseSeconds*time.Second - held)
	}
	thaw()
	t.Logf("thawed scheduler-1 after %v", time.Since(frozen).Round(100*time.Millisecond))
	waitForLog(t, ns, "scheduler-1", "scheduler", `REJECTED by the ledger: stale fencing token for "invoices/tenant-7": offered 1`, 60*time.Second)
	waitForLog(t, ns, "scheduler-3", "scheduler", "already exists; nothing charged twice (token 3)", 90*time.Second)
	if err := poll(30*time.Second, func() bool {
		code, done := terminated(getPod(t, ns, "scheduler-1"), "scheduler")
		return done && code == 3
	}); err != nil {
		t.Errorf("scheduler-1 did not exit 3 (stale write rejected): %s", describe(getPod(t, ns, "scheduler-1")))
	}

	fl := &fencingv1.FencedLease{}
	must(t, rc.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: lease}, fl))
	if fl.Status.Revocations != 1 || fl.Status.LastRevocation == nil || fl.Status.LastRevocation.PodName != "scheduler-1" {
		t.Errorf("want one revocation, of scheduler-1; status %+v", fl.Status)
	}
	tokens, err := grants.Stop()
	if err != nil {
		t.Fatalf("grant oracle: %v", err)
	}
	if want := []int64{1, 2, 3}; !slices.Equal(tokens, want) {
		t.Errorf("tokens granted %v, want %v", tokens, want)
	}
	plugin := program("kubectl-fencedlease")
	for _, args := range [][]string{{"status", lease}, {"history", lease}} {
		out, err := runProgram(plugin, append(args, "-n", ns, "--kubeconfig", rc.Kubeconfig)...)
		if err != nil {
			t.Fatalf("kubectl fencedlease %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("kubectl fencedlease %s:\n%s", strings.Join(args, " "), out)
		if !strings.Contains(out, "scheduler-1") {
			t.Errorf("kubectl fencedlease %s does not name the revoked scheduler-1:\n%s", args[0], out)
		}
	}
}
