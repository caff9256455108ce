package realnode

import (
	"context"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// testCronJobAllow: a CronJob with concurrencyPolicy Allow whose run outlasts its
// schedule. A run is started at once from it; the scheduled run comes at the next minute
// while the first still works, waits ungranted, and starts when the first ends: never two
// runs working at once, each with a token of its own.
func testCronJobAllow(t *testing.T) {
	const ns, lease = "cron", "cron"
	newNamespace(t, ns)
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 10, StartupDeadlineSeconds: 120}}))
	grants, err := testenvWatch(ns)
	must(t, err)
	// Every run works until 15 s past the next minute, when the scheduled run is created.
	until := time.Now().Truncate(time.Minute).Add(time.Minute + 15*time.Second)
	pod := workloadPod(ns, "", lease, holdContainer("run"))
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "WORK_UNTIL", Value: strconv.FormatInt(until.Unix(), 10)}}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	job := batchv1.JobSpec{BackoffLimit: ptr.To[int32](0),
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}
	must(t, rc.Client.Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "run"},
		Spec: batchv1.CronJobSpec{Schedule: "* * * * *", ConcurrencyPolicy: batchv1.AllowConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{Spec: job}}}))
	must(t, rc.Client.Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "run-now"}, Spec: job}))

	// The pods in the order of their Jobs: run-now's, then the schedule's.
	var pods []corev1.Pod
	if err := poll(2*time.Minute+30*time.Second, func() bool {
		list := &corev1.PodList{}
		if rc.Client.List(ctx, list, clientNamespace(ns)) != nil || len(list.Items) < 2 {
			return false
		}
		pods = list.Items
		return true
	}); err != nil {
		t.Fatalf("the scheduled run never came: %d pods", len(pods))
	}
	first, second := pods[0].Name, pods[1].Name
	if pods[1].Labels["job-name"] == "run-now" {
		first, second = second, first
	}
	started1 := reportedAt(t, ns, first, "run", "env=1 file=1", time.Minute)
	done1 := reportedAt(t, ns, first, "run", "done", 2*time.Minute)
	created2 := getPod(t, ns, second).CreationTimestamp.Time
	if !created2.Before(done1) {
		t.Fatalf("the scheduled run was created at %v, after the first ended (%v): no overlap to keep apart", created2, done1)
	}
	started2 := reportedAt(t, ns, second, "run", "env=2 file=2", 2*time.Minute)
	reportedAt(t, ns, second, "run", "done", time.Minute)
	if !started2.After(done1) {
		t.Errorf("the second run started working at %v, before the first ended at %v", started2, done1)
	}
	t.Logf("run 1 (token 1) worked %v–%v; run 2 created %v, waited, worked from %v (token 2), %v after run 1 ended",
		started1.Format(time.TimeOnly), done1.Format(time.TimeOnly), created2.Format(time.TimeOnly),
		started2.Format(time.TimeOnly), started2.Sub(done1).Round(time.Millisecond))
	must(t, rc.Client.Delete(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "run"}}))
	if _, err := grants.Stop(); err != nil {
		t.Errorf("grant oracle: %v", err)
	}
}
