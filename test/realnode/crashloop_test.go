package realnode

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// testCrashLoopBehindSidecar: a holder's workload, writing through the SQL fence, crashes
// every 2 s while its agent sidecar, which does not crash with it, keeps renewing. The
// kubelet restarts it once at once and backs off from its second exit (CrashLoopBackOff);
// the operator then refuses the sidecar's renewals, revokes the grant as PodCannotRun when its
// lease has run out, deletes the pod, and the next pod is granted and works; the fence
// accepts no write of the old token after the new token's first. Beside it a holder
// OOM-killed once, restarted and running again keeps its grant.
func testCrashLoopBehindSidecar(t *testing.T) {
	const ns, onceNS, lease, leaseSeconds = "crashloop", "oomonce", "singleton", 4
	ctx := context.Background()
	var grants []*testenv.GrantWatcher
	for _, ns := range []string{ns, onceNS} {
		newNamespace(t, ns)
		must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
			Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds, StartupDeadlineSeconds: 60}}))
		g, err := testenvWatch(ns)
		must(t, err)
		grants = append(grants, g)
	}
	dsn, db := fencedDatabase(t, "crashloop")
	withAgent := func(p *corev1.Pod) *corev1.Pod {
		p.Annotations = map[string]string{fencingv1.AgentAnnotation: "true"}
		return p
	}
	ledger := corev1.EnvVar{Name: "LEDGER_DSN", Value: dsn}
	crashing := workloadPod(ns, "crashing", lease, corev1.Container{Name: "work", Command: []string{"/workload"},
		Env: []corev1.EnvVar{{Name: "CRASH_AFTER", Value: "2s"}, ledger}})
	must(t, rc.Client.Create(ctx, withAgent(crashing)))
	once := workloadPod(onceNS, "oom-once", lease, corev1.Container{Name: "work", Command: []string{"/workload"},
		Env:          []corev1.EnvVar{{Name: "CRASH_AFTER", Value: "2s"}, {Name: "CRASH_OOM", Value: "1"}, {Name: "CRASH_ONCE", Value: "/scratch/crashed"}},
		Resources:    corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("48Mi")}},
		VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}})
	once.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	must(t, rc.Client.Create(ctx, withAgent(once)))
	reportedAt(t, ns, "crashing", "work", "env=1 file=1", 90*time.Second)
	must(t, rc.Client.Create(ctx, withAgent(workloadPod(ns, "next", lease, corev1.Container{Name: "work", Command: []string{"/workload"},
		Env: []corev1.EnvVar{ledger}}))))

	var rv *fencingv1.Revocation
	if err := poll(60*time.Second, func() bool {
		rv = getFencedLease(t, ns, lease).Status.LastRevocation
		return rv != nil
	}); err != nil {
		t.Fatalf("the crash-looping holder was never revoked: its sidecar's renewals keep it")
	}
	// By then the back-off (10 s) may have ended and the container run again: the message
	// says how it last ended either way.
	if rv.Reason != fencingv1.ReasonPodCannotRun || rv.PodName != "crashing" || rv.Token != 1 ||
		!strings.Contains(rv.Message, "container work: ") || !strings.Contains(rv.Message, "last exit: Error, code 1") {
		t.Errorf("want crashing's token 1 revoked as PodCannotRun with its last exit in the message; got %+v", *rv)
	}
	working := reportedAt(t, ns, "next", "work", "env=2 file=2", 90*time.Second)
	reportedAt(t, ns, "next", "work", "wrote token 2", 30*time.Second)
	if tokens := fencedWrites(t, db); !slices.Contains(tokens, 1) {
		t.Errorf("the crashing holder never wrote with token 1 (tokens accepted: %v): nothing to fence", tokens)
	}
	if err := poll(60*time.Second, func() bool { return getPodOrNil(ns, "crashing") == nil }); err != nil {
		t.Errorf("the revoked crash-looping pod was not deleted (DeletePod)")
	}
	// The kubelet's first BackOff event (second precision) is when it decided on the back-off
	// after the second exit; the pod's status shows CrashLoopBackOff some seconds later on a
	// real kubelet (measured: toward the end of the first, 10 s, back-off).
	backOff := podEventAt(t, ns, "crashing", "BackOff")
	cutOff := podEventAt(t, ns, "crashing", string(fencingv1.ReasonPodCannotRun))
	measured("crash loop behind the agent sidecar: the kubelet's BackOff → cut off → revoked → next pod at work",
		"%v → %v → %v (lease %d s, event times in seconds)", cutOff.Sub(backOff), rv.Time.Sub(backOff).Round(100*time.Millisecond),
		working.Sub(backOff).Round(100*time.Millisecond), leaseSeconds)

	// The OOM-killed holder: restarted once, running, still holding.
	if err := poll(60*time.Second, func() bool {
		for _, s := range getPod(t, onceNS, "oom-once").Status.ContainerStatuses {
			if s.Name == "work" && s.RestartCount == 1 && s.State.Running != nil {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("oom-once never ran again after one crash:\n%s", describe(getPod(t, onceNS, "oom-once")))
	}
	for _, s := range getPod(t, onceNS, "oom-once").Status.ContainerStatuses {
		if last := s.LastTerminationState.Terminated; s.Name == "work" && (last == nil || last.Reason != "OOMKilled") {
			t.Errorf("want oom-once's first run OOMKilled, got %+v", s.LastTerminationState)
		}
	}
	time.Sleep(2 * leaseSeconds * time.Second)
	if fl := getFencedLease(t, onceNS, lease); fl.Status.Holder == nil || fl.Status.Holder.PodName != "oom-once" ||
		fl.Status.Holder.Token != 1 || fl.Status.Revocations != 0 {
		t.Errorf("oom-once, OOM-killed once and running again, should keep token 1; status %+v", fl.Status)
	}
	for _, g := range grants {
		if _, err := g.Stop(); err != nil {
			t.Errorf("grant oracle: %v", err)
		}
	}
}
