package realnode

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// missingImage is a tag the cluster's registry does not have: a real pull fails
// (ErrImagePull, then ImagePullBackOff).
const missingImage = workloadImage + ":no-such-tag"

// testBadImageCold: a Cold pod whose image cannot be pulled is granted first, then
// revoked, deleted, and the next pod is granted and works. Under hold the container never
// starts and never renews: PodCannotStart at once. Behind the agent sidecar, the sidecar
// starts and renews before the workload's pull fails: its renewals are refused and it is
// revoked as PodCannotRun once its lease has run out.
func testBadImageCold(t *testing.T) {
	const leaseSeconds = 4
	var cases sync.WaitGroup
	defer cases.Wait()
	for _, c := range []struct {
		name  string
		agent bool
		want  []fencingv1.RevocationReason
	}{
		{"hold", false, []fencingv1.RevocationReason{fencingv1.ReasonPodCannotStart}},
		// PodCannotStart too, should the pull fail before the sidecar's first renewal is seen.
		{"agent", true, []fencingv1.RevocationReason{fencingv1.ReasonPodCannotRun, fencingv1.ReasonPodCannotStart}},
	} {
		// The two cases side by side, each in its namespace: one waits on the kubelet's
		// pull back-off, the other on a lease; neither loads the machine.
		cases.Add(1)
		go func() {
			defer cases.Done()
			t.Run(c.name, func(t *testing.T) {
				ns, lease := "badimage-"+c.name, "singleton"
				newNamespace(t, ns)
				ctx := context.Background()
				must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
					Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds, StartupDeadlineSeconds: 120}}))
				grants, err := testenvWatch(ns)
				must(t, err)
				created := time.Now()
				for _, name := range []string{"bad", "good"} {
					work := holdContainer("work")
					if c.agent {
						work.Command = []string{"/workload"}
					}
					pod := workloadPod(ns, name, lease, work)
					if name == "bad" {
						pod.Spec.Containers[0].Image = missingImage
					}
					if c.agent {
						pod.Annotations = map[string]string{fencingv1.AgentAnnotation: "true"}
					}
					must(t, rc.Client.Create(ctx, pod))
					time.Sleep(50 * time.Millisecond) // bad is the older
				}
				working := reportedAt(t, ns, "good", "work", "env=2 file=2", 2*time.Minute)
				rv := revocationRecorded(t, ns, lease, 1)
				if rv == nil || rv.PodName != "bad" || rv.Token != 1 || !slices.Contains(c.want, rv.Reason) || !strings.Contains(rv.Message, "ImagePullBackOff") {
					t.Fatalf("want bad's token 1 revoked as one of %v for ImagePullBackOff; got %+v", c.want, rv)
				}
				if err := poll(time.Minute, func() bool { return getPodOrNil(ns, "bad") == nil }); err != nil {
					t.Errorf("the pod that could not pull its image was not deleted")
				}
				pulling := podEventAt(t, ns, "bad", "Pulling")
				measured("bad image, real pull ("+c.name+"): pod created → revoked ("+string(rv.Reason)+") → next pod at work",
					"%v → %v (first pull attempt %v after create; lease %d s)", rv.Time.Sub(created).Round(100*time.Millisecond),
					working.Sub(created).Round(100*time.Millisecond), pulling.Sub(created.Truncate(time.Second)), leaseSeconds)
				if _, err := grants.Stop(); err != nil {
					t.Errorf("grant oracle: %v", err)
				}
			})
		}()
	}
}

// testBadImageWarm: a Warm Deployment of two replicas under hold rolled to a tag the
// registry does not have. The new pod cannot pull, the rollout stalls, and the holder
// keeps its grant and works. When the holder's pod then goes, the grant passes over the
// pod that cannot start, older, to the healthy standby of the old revision.
func testBadImageWarm(t *testing.T) {
	// Nothing here waits for a lease to run out (the holder's pod is deleted, which
	// releases): a lease of 8 s keeps the holder granted beside the other specs' load.
	const ns, lease, leaseSeconds = "badimage-warm", "singleton", 8
	newNamespace(t, ns)
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds, StartupDeadlineSeconds: 120, Standby: fencingv1.StandbyWarm}}))
	grants, err := testenvWatch(ns)
	must(t, err)
	_, holder := holdDeployment(t, ns, lease, 2)

	updateDeployment(t, ns, "singleton", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = missingImage })
	var bad string
	if err := poll(2*time.Minute, func() bool {
		list := &corev1.PodList{}
		if rc.Client.List(ctx, list, clientNamespace(ns)) != nil {
			return false
		}
		for _, p := range list.Items {
			for _, s := range p.Status.ContainerStatuses {
				if w := s.State.Waiting; p.Spec.Containers[0].Image == missingImage && w != nil && w.Reason == "ImagePullBackOff" {
					bad = p.Name
					return true
				}
			}
		}
		return false
	}); err != nil {
		t.Fatalf("the rolled-out pod never reported ImagePullBackOff")
	}
	time.Sleep(leaseSeconds * time.Second)
	fl := getFencedLease(t, ns, lease)
	if fl.Status.Holder == nil || fl.Status.Holder.PodName != holder || fl.Status.Revocations != 0 {
		t.Fatalf("the stalled rollout moved the grant: want %s still holding token 1; status %+v", holder, fl.Status)
	}
	if log := logs(t, ns, holder, "work"); strings.Contains(log, "stopped") {
		t.Errorf("the holder's work was stopped by a stalled rollout:\n%s", log)
	}

	// The old revision's standby is replaced, so the pod that cannot pull is the oldest
	// standby: first in line by age.
	standby := ""
	list := &corev1.PodList{}
	must(t, rc.Client.List(ctx, list, clientNamespace(ns)))
	for _, p := range list.Items {
		if p.Name != holder && p.Name != bad {
			standby = p.Name
		}
	}
	must(t, rc.Client.Delete(ctx, getPod(t, ns, standby)))
	if err := poll(2*time.Minute, func() bool {
		must(t, rc.Client.List(ctx, list, clientNamespace(ns)))
		for _, p := range list.Items {
			if p.Name != holder && p.Name != bad && p.Name != standby && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("the old revision's standby was not replaced")
	}

	// The holder's pod goes (its node drained, a user's delete): the healthy standby of the
	// old revision is granted, not the older pod that cannot pull.
	must(t, rc.Client.Delete(ctx, getPod(t, ns, holder)))
	deleted := time.Now()
	var next string
	if err := poll(time.Minute, func() bool {
		fl := getFencedLease(t, ns, lease)
		if fl.Status.Holder == nil || fl.Status.Holder.Token != 2 {
			return false
		}
		next = fl.Status.Holder.PodName
		return true
	}); err != nil {
		t.Fatalf("nobody was granted token 2 after the holder's pod went: %+v", getFencedLease(t, ns, lease).Status)
	}
	if next == bad {
		t.Fatalf("token 2 went to %s, which cannot pull its image", next)
	}
	working := reportedAt(t, ns, next, "work", "env=2 file=2", time.Minute)
	if p := getPodOrNil(ns, bad); p != nil && p.Annotations[fencingv1.TokenAnnotation] != "" {
		t.Errorf("the pod that cannot pull was given token %s", p.Annotations[fencingv1.TokenAnnotation])
	}
	measured("Warm rollout to a missing tag: holder's pod deleted → healthy standby at work", "%v (lease %d s, released by the deletion)",
		working.Sub(deleted).Round(10*time.Millisecond), leaseSeconds)
	if _, err := grants.Stop(); err != nil {
		t.Errorf("grant oracle: %v", err)
	}
}

// holdDeployment creates the Deployment "singleton" of replicas pods under hold for lease,
// and waits until its holder renewed and works (token 1).
func holdDeployment(t *testing.T, ns, lease string, replicas int32) (*appsv1.Deployment, string) {
	t.Helper()
	template := workloadPod(ns, "", lease, holdContainer("work"))
	template.Labels["app"] = "singleton"
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "singleton"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "singleton"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: template.ObjectMeta, Spec: template.Spec}}}
	must(t, rc.Client.Create(context.Background(), d))
	var holder string
	if err := poll(2*time.Minute, func() bool {
		fl := getFencedLease(t, ns, lease)
		if fl.Status.Holder == nil || fl.Status.Holder.FirstRenewTime == nil {
			return false
		}
		holder = fl.Status.Holder.PodName
		return true
	}); err != nil {
		t.Fatalf("the Deployment's holder never renewed")
	}
	reportedAt(t, ns, holder, "work", "env=1 file=1", time.Minute)
	return d, holder
}

// updateDeployment applies change to Deployment ns/name as read now, again when the write
// loses a race (the deployment controller writes the object too, its status and
// annotations, so a read-then-write can be refused on its resourceVersion).
func updateDeployment(t *testing.T, ns, name string, change func(*appsv1.Deployment)) {
	t.Helper()
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		if err := rc.Client.Get(context.Background(), clientKey(ns, name), d); err != nil {
			return err
		}
		change(d)
		return rc.Client.Update(context.Background(), d)
	}))
}
