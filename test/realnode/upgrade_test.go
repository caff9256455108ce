package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// testUpgrade: the previous release installed from its bundle (its CRD, its images, its
// pod webhook failing closed), a holder at work behind its agent sidecar and a pod
// waiting; then the current bundle applied as a user upgrades (kubectl apply
// --server-side, then the webhook's objects deleted, as docs/operations.md says). With
// -realnode.long (make chaos) the previous one is then applied again (the rollback), and
// the current one again. Throughout, the holder is never revoked and keeps renewing, the
// objects the other version wrote are served, and the next grants continue the tokens.
// Through the first upgrade a candidate is created every half second: each must come back
// gated from its creation and wait. Where the previous webhook and the current policies
// overlap (from the apply until the webhook configuration is deleted), a creation may be
// refused — never admitted half-way — so a refusal outside that window, plus the API
// server's few seconds to drop the deleted configuration, fails the spec.
func testUpgrade(t *testing.T) {
	root := testenv.RepoRoot()
	u := &upgradeRun{t: t, ns: "upgrade", lease: "singleton", leaseSeconds: 4,
		current: filepath.Join(root, "dist", "install.yaml"), previous: filepath.Join(os.Getenv(binEnv), "previous", "install.yaml")}
	began := time.Now()
	undeployBundle(t)
	t.Logf("the bundle undeployed in %v", time.Since(began).Round(100*time.Millisecond))
	began = time.Now()
	u.install(u.previous, previousTag, nil)
	t.Logf("the previous release installed and rolled out in %v", time.Since(began).Round(100*time.Millisecond))

	ns, lease, leaseSeconds := u.ns, u.lease, u.leaseSeconds
	newNamespace(t, ns)
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds, StartupDeadlineSeconds: 60}}))
	grants, err := testenvWatch(ns)
	must(t, err)
	u.candidate("a")
	began = time.Now()
	reportedAt(t, ns, "a", "work", "env=1 file=1", 90*time.Second)
	t.Logf("a at work %v after its creation", time.Since(began).Round(100*time.Millisecond))
	if img := getPod(t, ns, "a").Spec.InitContainers[0].Image; img != "fencedlease-agent:"+previousTag {
		t.Errorf("the previous operator injected agent %s", img)
	}
	u.candidate("b")

	// Candidates of a FencedLease of their own, created through the upgrade.
	const streamed = "stream"
	// Nothing renews for its holder (no agent): a startup deadline past the spec's end.
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: streamed},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds, StartupDeadlineSeconds: 900}}))
	stopStream := streamCandidates(ns, streamed, 500*time.Millisecond)
	applied := time.Now()
	var webhookGone time.Time
	upgraded := u.install(u.current, "dev", func() { deleteWebhookObjects(t); webhookGone = time.Now() })
	time.Sleep(2 * time.Duration(leaseSeconds) * time.Second)
	created, ungated, refused := stopStream()
	for _, pod := range ungated {
		t.Errorf("admitted without the gate through the upgrade: %s", pod)
	}
	// The API server drops a deleted webhook configuration within a second or so.
	const propagation = 5 * time.Second
	var lastRefusal time.Time
	for _, r := range refused {
		if r.at.Before(applied) || r.at.After(webhookGone.Add(propagation)) {
			t.Errorf("candidate %s refused at %s, outside the overlap (apply at %s, webhook objects deleted at %s): %v",
				r.pod, r.at.Format("15:04:05.000"), applied.Format("15:04:05.000"), webhookGone.Format("15:04:05.000"), r.err)
		}
		lastRefusal = r.at
	}
	if err := poll(time.Minute, func() bool { return streamSettled(t, ns, streamed, len(created)) }); err != nil {
		t.Errorf("the %d streamed candidates are not one holder and the rest waiting, gated:\n%s", len(created), streamState(t, ns, streamed))
	}
	must(t, clientset(t).CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: fencingv1.LeaseLabel + "=" + streamed}))
	u.holds("after the upgrade", "a", 1)
	if log := logs(t, ns, "a", "work"); strings.Contains(log, "stopped") {
		t.Errorf("the holder's work was stopped by the upgrade:\n%s", log)
	}
	must(t, rc.Client.Delete(ctx, getPod(t, ns, "a")))
	reportedAt(t, ns, "b", "work", "env=2 file=2", 90*time.Second)
	if *long {
		rolledBack, again := u.rollBackAndUpgradeAgain()
		measured("upgrade from the previous release, rollback, upgrade again (kubectl apply → rolled out)",
			"%v / %v / %v, holder kept, no revocation, tokens 1, 2, 3", upgraded.Round(time.Second), rolledBack.Round(time.Second), again.Round(time.Second))
	} else {
		measured("upgrade from the previous release (kubectl apply → rolled out)", "%v, holder kept, no revocation, tokens 1, 2",
			upgraded.Round(time.Second))
	}
	overlap := "none refused"
	if len(refused) > 0 {
		overlap = fmt.Sprintf("%d refused, the last %v after the apply (webhook objects deleted %v after it)", len(refused),
			lastRefusal.Sub(applied).Round(10*time.Millisecond), webhookGone.Sub(applied).Round(10*time.Millisecond))
	}
	measured("candidates created every 0.5 s through the upgrade", "%d created and waiting; %s", len(created), overlap)
	if _, err := grants.Stop(); err != nil {
		t.Errorf("grant oracle: %v", err)
	}
}

// upgradeRun is the upgrade spec's FencedLease and the two bundles it moves between.
type upgradeRun struct {
	t                 *testing.T
	ns, lease         string
	leaseSeconds      int32
	current, previous string
}

// install applies bundle and waits until every operator pod runs fencedlease:tag.
func (u *upgradeRun) install(bundle, tag string, after func()) time.Duration {
	u.t.Helper()
	took := applyBundle(u.t, bundle, after)
	if err := poll(3*time.Minute, func() bool { return operatorImagesAre(u.t, "fencedlease:"+tag) }); err != nil {
		u.t.Fatalf("the operator's pods do not all run fencedlease:%s", tag)
	}
	return took
}

// candidate creates a candidate of the spec's FencedLease behind the agent sidecar.
func (u *upgradeRun) candidate(name string) {
	pod := workloadPod(u.ns, name, u.lease, corev1.Container{Name: "work", Command: []string{"/workload"}})
	pod.Annotations = map[string]string{fencingv1.AgentAnnotation: "true"}
	must(u.t, rc.Client.Create(context.Background(), pod))
}

// holds fails the spec unless pod holds token, nothing was revoked, and it renewed within
// a lease.
func (u *upgradeRun) holds(when, pod string, token int64) {
	u.t.Helper()
	fl := getFencedLease(u.t, u.ns, u.lease)
	if fl.Status.Holder == nil || fl.Status.Holder.PodName != pod || fl.Status.Holder.Token != token || fl.Status.Revocations != 0 {
		u.t.Fatalf("%s: want %s holding token %d, no revocation; status %+v", when, pod, token, fl.Status)
	}
	if since := time.Since(lastRenewal(u.t, u.ns, u.lease)); since > time.Duration(u.leaseSeconds)*time.Second {
		u.t.Fatalf("%s: %s's last renewal was %v ago, over a lease", when, pod, since)
	}
}

// rollBackAndUpgradeAgain, with b holding token 2 on the current release: the previous
// release applied again as docs/operations.md says, c granted token 3 under it, then the
// current release once more, so the specs after this one find it installed.
func (u *upgradeRun) rollBackAndUpgradeAgain() (rolledBack, again time.Duration) {
	t, ctx := u.t, context.Background()
	// The admission objects the previous release lacks are deleted first (kubectl apply
	// leaves them).
	for _, kinds := range [][]string{{"mutatingadmissionpolicybinding,mutatingadmissionpolicy", "fencedlease-candidate"},
		{"validatingadmissionpolicybinding,validatingadmissionpolicy", "fencedlease-candidate-check"}} {
		if out, err := kubectl("delete", kinds[0], kinds[1]); err != nil {
			t.Fatalf("kubectl delete %s %s: %v\n%s", kinds[0], kinds[1], err, out)
		}
	}
	rolledBack = u.install(u.previous, previousTag, nil)
	time.Sleep(2 * time.Duration(u.leaseSeconds) * time.Second)
	u.holds("after the rollback", "b", 2)
	u.candidate("c")
	must(t, rc.Client.Delete(ctx, getPod(t, u.ns, "b")))
	reportedAt(t, u.ns, "c", "work", "env=3 file=3", 90*time.Second)
	again = u.install(u.current, "dev", func() { deleteWebhookObjects(t) })
	time.Sleep(2 * time.Duration(u.leaseSeconds) * time.Second)
	u.holds("after upgrading again", "c", 3)
	return rolledBack, again
}

// refusal is a candidate's creation the API server refused.
type refusal struct {
	pod string
	at  time.Time
	err error
}

// streamCandidates creates a candidate of lease every interval until the returned
// function is called, which returns the pods created, those of them the API server
// admitted without the gate (with what admission left on them), and the refusals.
func streamCandidates(ns, lease string, interval time.Duration) func() (created, ungated []string, refused []refusal) {
	stop, done := make(chan struct{}), make(chan struct{})
	var created, ungated []string
	var refused []refusal
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			pod := workloadPod(ns, fmt.Sprintf("%s-%d", lease, i), lease, corev1.Container{Name: "work", Command: []string{"/workload"}})
			if err := rc.Client.Create(context.Background(), pod); err != nil {
				refused = append(refused, refusal{pod.Name, time.Now(), err})
			} else {
				created = append(created, pod.Name)
				if !slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == fencingv1.SchedulingGate }) {
					ungated = append(ungated, fmt.Sprintf("%s at %s: gates %v, annotations %v, containers' env %v",
						pod.Name, time.Now().Format("15:04:05.000"), pod.Spec.SchedulingGates, pod.Annotations, pod.Spec.Containers[0].Env))
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(interval):
			}
		}
	}()
	return func() ([]string, []string, []refusal) {
		close(stop)
		<-done
		return created, ungated, refused
	}
}

// streamSettled: of lease's n candidates, one holds and the others wait, gated.
func streamSettled(t *testing.T, ns, lease string, n int) bool {
	pods, err := clientset(t).CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: fencingv1.LeaseLabel + "=" + lease})
	if err != nil || len(pods.Items) != n {
		return false
	}
	holding, waiting := 0, 0
	for _, p := range pods.Items {
		switch fencingv1.PodState(p.Annotations[fencingv1.StateAnnotation]) {
		case fencingv1.PodHolding:
			holding++
		case fencingv1.PodWaiting:
			if slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == fencingv1.SchedulingGate }) {
				waiting++
			}
		}
	}
	return holding == 1 && waiting == n-1
}

// streamState lists lease's candidates: state, token, gates, node.
func streamState(t *testing.T, ns, lease string) string {
	pods, err := clientset(t).CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: fencingv1.LeaseLabel + "=" + lease})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "  %s created %s: state %q token %q standby %q gates %v node %q phase %s\n", p.Name, p.CreationTimestamp.Format("15:04:05"),
			p.Annotations[fencingv1.StateAnnotation], p.Annotations[fencingv1.TokenAnnotation], p.Annotations[fencingv1.StandbyAnnotation],
			p.Spec.SchedulingGates, p.Spec.NodeName, p.Status.Phase)
	}
	return b.String()
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
