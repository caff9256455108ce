package realnode

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// testBadImageColdRollout: a Cold Deployment of one replica under hold rolled to a tag the
// registry does not have. A Cold pod is gated until it is granted, so nothing pulls its
// image before: the operator asks the holder to hand off to it (H1), hold does not, the
// grace period ends, the holder is cut off and revoked (HandoffTimeout), the new pod is
// granted, cannot pull, and is revoked at once as PodCannotStart and deleted. The revoked
// holder's pod was deleted too, and the old revision's ReplicaSet replaced it: that pod
// is granted next and works — until the next pod of the bad revision gets the holder asked
// to hand off again. Once the rollout is undone, the grant stays. Never two holders,
// tokens rising.
func testBadImageColdRollout(t *testing.T) {
	// A lease of 8 s: a holder on 4 s that missed its renewals beside the other specs'
	// load released its grant, and its pod, Released and never granted again, was not
	// replaced, so no pod of the old revision could work (the point here is the rollout,
	// not expiry).
	const ns, lease, leaseSeconds, graceSeconds = "badimage-rollout", "singleton", 8, 15
	newNamespace(t, ns)
	ctx := context.Background()
	must(t, rc.Client.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: leaseSeconds, StartupDeadlineSeconds: 120, HandoffGracePeriodSeconds: graceSeconds}}))
	grants, err := testenvWatch(ns)
	must(t, err)
	_, holder := holdDeployment(t, ns, lease, 1)

	updateDeployment(t, ns, "singleton", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = missingImage })
	rolled := time.Now()
	var cannotStart *fencingv1.Revocation
	if err := poll(2*time.Minute, func() bool {
		rv := getFencedLease(t, ns, lease).Status.LastRevocation
		if rv != nil && rv.Reason == fencingv1.ReasonPodCannotStart {
			cannotStart = rv
			return true
		}
		return false
	}); err != nil {
		t.Fatalf("no pod of the bad revision was revoked as PodCannotStart: %+v", getFencedLease(t, ns, lease).Status)
	}
	if !strings.Contains(cannotStart.Message, "ImagePull") && !strings.Contains(cannotStart.Message, "ErrImage") {
		t.Errorf("PodCannotStart's message does not say the image could not be pulled: %q", cannotStart.Message)
	}
	if p := getPodOrNil(ns, holder); p != nil && p.Annotations[fencingv1.StateAnnotation] == string(fencingv1.PodHolding) {
		t.Fatalf("the old holder %s still holds after the grant went to the new revision", holder)
	}

	// The revoked holder's pod was deleted (DeletePod) and the old revision's ReplicaSet
	// replaced it: that pod is granted next and works, until the next hand-off request.
	var good string
	var goodToken int64
	if err := poll(2*time.Minute, func() bool {
		fl := getFencedLease(t, ns, lease)
		h := fl.Status.Holder
		if h == nil || h.FirstRenewTime == nil || h.Token <= cannotStart.Token {
			return false
		}
		p := getPodOrNil(ns, h.PodName)
		if p == nil || p.Spec.Containers[0].Image == missingImage {
			return false
		}
		good, goodToken = p.Name, h.Token
		return true
	}); err != nil {
		t.Fatalf("no pod of the good revision was granted after the bad one was revoked: %+v", getFencedLease(t, ns, lease).Status)
	}
	back := loggedWithPrefix(t, ns, good, "env=", time.Minute)

	// The user rolls back; the rollout completes and the grant stays.
	if out, err := kubectl("-n", ns, "rollout", "undo", "deployment/singleton"); err != nil {
		t.Fatalf("kubectl rollout undo: %v\n%s", err, out)
	}
	if out, err := kubectl("-n", ns, "rollout", "status", "deployment/singleton", "--timeout=180s"); err != nil {
		t.Fatalf("the rollback did not complete: %v\n%s", err, out)
	}
	settled := getFencedLease(t, ns, lease).Status
	time.Sleep(2 * leaseSeconds * time.Second)
	after := getFencedLease(t, ns, lease).Status
	if after.Revocations != settled.Revocations || after.Holder == nil || settled.Holder == nil || after.Holder.Token != settled.Holder.Token {
		t.Errorf("the grant moved after the rollback completed: %+v, then %+v", settled, after)
	}
	measured("bad image, Cold rollout: rollout → the bad pod revoked (PodCannotStart) → the old revision at work",
		"%v → %v (hand-off grace %d s, lease %d s; token %d; %d revocations until the rollback held)",
		cannotStart.Time.Sub(rolled).Round(100*time.Millisecond), back.Sub(rolled).Round(100*time.Millisecond),
		graceSeconds, leaseSeconds, goodToken, after.Revocations)
	if _, err := grants.Stop(); err != nil {
		t.Errorf("grant oracle: %v", err)
	}
}
