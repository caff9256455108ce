package realnode

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// samplesGrantedBound is what the samples spec allows from kubectl apply -k config/samples
// to every FencedLease granted (issue 60: within a minute).
const samplesGrantedBound = time.Minute

// checkSamples: config/samples, applied in ns at applied as a newcomer applies them
// (`kubectl apply -k`, the README's commands: testReadme), on the real nodes whose
// registry serves the images they name (the project's, and the busybox stand-in built
// here). Every FencedLease is granted within a minute and none is revoked; no container
// fails to pull, to be configured or to run; the long-running samples are held (the
// sharded one on all three slots); the Job completes; the Warm holder serves its token;
// and a run taken from each CronJob is granted after the candidate pod ends and
// completes, the invoice scheduler writing its ledger.
// failures is what watchPodFailures saw, watching since before the apply.
func checkSamples(t *testing.T, ns string, applied time.Time, failures func() []string) {
	ctx := context.Background()
	leases := &fencingv1.FencedLeaseList{}
	must(t, rc.Client.List(ctx, leases, clientNamespace(ns)))
	if len(leases.Items) < 7 {
		t.Fatalf("config/samples made %d FencedLeases, want 7 or more", len(leases.Items))
	}
	granted := map[string]time.Duration{}
	_ = poll(time.Until(applied.Add(samplesGrantedBound)), func() bool {
		list := &fencingv1.FencedLeaseList{}
		if rc.Client.List(ctx, list, clientNamespace(ns)) != nil {
			return false
		}
		for _, fl := range list.Items {
			if _, ok := granted[fl.Name]; !ok && fl.Status.Transitions > 0 {
				granted[fl.Name] = time.Since(applied)
			}
		}
		return len(granted) == len(list.Items)
	})
	var slowest time.Duration
	for _, fl := range leases.Items {
		at, ok := granted[fl.Name]
		if !ok || at > samplesGrantedBound {
			t.Errorf("FencedLease %s was not granted within %v of kubectl apply", fl.Name, samplesGrantedBound)
		}
		slowest = max(slowest, at)
	}
	measured("config/samples applied → every FencedLease granted", "%v (%d FencedLeases)", slowest.Round(100*time.Millisecond), len(leases.Items))
	if t.Failed() {
		t.FailNow()
	}

	for _, name := range []string{"report-generator", "dispatcher", "leader", "ledger-compactor"} {
		if err := poll(30*time.Second, func() bool { return held(getFencedLease(t, ns, name)) }); err != nil {
			t.Errorf("FencedLease %s is not Held: %+v", name, getFencedLease(t, ns, name).Status.Conditions)
		}
	}
	if err := poll(30*time.Second, func() bool { return getFencedLease(t, ns, "invoice-shards").Status.Holding == "3/3" }); err != nil {
		t.Errorf("invoice-shards holds %q of its slots, want 3/3", getFencedLease(t, ns, "invoice-shards").Status.Holding)
	}
	expectJobComplete(t, ns, "invoice-batch", 2*time.Minute)
	expectLeaderServesItsToken(t, ns)

	// A run now from each CronJob: both wait for the candidate pod's 15 s, then in turn.
	for _, cron := range []string{"invoice-scheduler", "invoice-scheduler-tenant-7"} {
		if out, err := kubectl("-n", ns, "create", "job", "--from=cronjob/"+cron, cron+"-now"); err != nil {
			t.Fatalf("kubectl create job --from=cronjob/%s: %v\n%s", cron, err, out)
		}
	}
	for _, cron := range []string{"invoice-scheduler", "invoice-scheduler-tenant-7"} {
		expectJobComplete(t, ns, cron+"-now", 3*time.Minute)
	}
	if out := jobLogs(t, ns, "invoice-scheduler-tenant-7-now", "scheduler"); !strings.Contains(out, "invoice run tenant-7/2026-11 created with token") {
		t.Errorf("the invoice scheduler's run did not write its ledger; its log:\n%s", out)
	}

	must(t, rc.Client.List(ctx, leases, clientNamespace(ns)))
	for _, fl := range leases.Items {
		if fl.Status.Revocations != 0 {
			t.Errorf("FencedLease %s revoked %d grant(s): last %+v", fl.Name, fl.Status.Revocations, fl.Status.LastRevocation)
		}
	}
	for _, f := range failures() {
		t.Error(f)
	}
}

func held(fl *fencingv1.FencedLease) bool {
	return meta.IsStatusConditionTrue(fl.Status.Conditions, fencingv1.ConditionHeld)
}

// watchPodFailures watches the namespace's pods until the spec ends and returns what it
// saw go wrong: a container that could not pull its image, be configured or run.
func watchPodFailures(t *testing.T, ns string) func() []string {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	seen := map[string]bool{}
	var failures []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list := &corev1.PodList{}
			if rc.Client.List(ctx, list, clientNamespace(ns)) == nil {
				for _, p := range list.Items {
					for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
						bad := ""
						switch {
						case s.State.Waiting != nil && badWaiting[s.State.Waiting.Reason]:
							bad = s.State.Waiting.Reason + ": " + s.State.Waiting.Message
						case s.State.Terminated != nil && s.State.Terminated.ExitCode != 0:
							bad = fmt.Sprintf("exit code %d (%s)", s.State.Terminated.ExitCode, s.State.Terminated.Reason)
						}
						key := p.Name + "/" + s.Name
						if bad != "" && !seen[key] {
							seen[key] = true
							mu.Lock()
							failures = append(failures, fmt.Sprintf("pod %s container %s: %s", p.Name, s.Name, bad))
							mu.Unlock()
						}
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	stop := func() []string {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return failures
	}
	t.Cleanup(func() { stop() })
	return stop
}

var badWaiting = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true, "CrashLoopBackOff": true}

func expectJobComplete(t *testing.T, ns, name string, timeout time.Duration) {
	t.Helper()
	job := &batchv1.Job{}
	err := poll(timeout, func() bool {
		if rc.Client.Get(context.Background(), clientKey(ns, name), job) != nil {
			return false
		}
		for _, c := range job.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("Job %s did not complete within %v: %+v", name, timeout, job.Status)
	}
}

// jobLogs is a container's log in the Job's pods.
func jobLogs(t *testing.T, ns, job, container string) string {
	list := &corev1.PodList{}
	must(t, rc.Client.List(context.Background(), list, clientNamespace(ns)))
	var b strings.Builder
	for _, p := range list.Items {
		if p.Labels["job-name"] == job {
			b.WriteString(logs(t, ns, p.Name, container))
		}
	}
	return b.String()
}

// expectLeaderServesItsToken: the Warm sample's holder serves "leader with token N" with
// the token it holds, read by its shell from the agent's state file.
func expectLeaderServesItsToken(t *testing.T, ns string) {
	t.Helper()
	var body string
	err := poll(30*time.Second, func() bool {
		h := getFencedLease(t, ns, "leader").Status.Holder
		if h == nil {
			return false
		}
		p := getPod(t, ns, h.PodName)
		if p.Status.PodIP == "" {
			return false
		}
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + p.Status.PodIP + ":8080/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		body = string(raw)
		return body == fmt.Sprintf("leader with token %d\n", h.Token)
	})
	if err != nil {
		t.Errorf("the Warm sample's holder serves %q, want its token", body)
	}
}
