package workloads

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// rollingDeployment is a replicas: 1 Deployment with the default strategy: RollingUpdate,
// maxSurge 25% (1) and maxUnavailable 25% (0), so the new pod must be available before
// the old one goes.
func rollingDeployment(ns string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scheduler"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: template("").Labels}, Template: template("example.invalid/scheduler:v1"),
		},
	}
}

// rollTo updates d's image and returns when the update was accepted.
func rollTo(d *appsv1.Deployment, image string) time.Time {
	GinkgoHelper()
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
	d.Spec.Template.Spec.Containers[0].Image = image
	Expect(k8s.Update(ctx, d)).To(Succeed())
	return time.Now()
}

// expectRolledOut waits until d's rollout is complete: one updated, available replica and
// no other.
func expectRolledOut(d *appsv1.Deployment) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(BeEquivalentTo(1))
		g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1))
		g.Expect(d.Status.Replicas).To(BeEquivalentTo(1))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

func expectGone(ns, pod string) {
	GinkgoHelper()
	Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod}, &corev1.Pod{}))
	}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "pod %s is gone", pod)
}

var _ = Describe("Rolling updates hand off (issue 8, section 3)", func() {
	var ns string
	create := func(grace int32) {
		ns = newNamespace()
		Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 3, StartupDeadlineSeconds: 30, HandoffGracePeriodSeconds: grace}})).To(Succeed())
	}

	It("completes a replicas: 1 Deployment's default RollingUpdate: the holder is asked to hand off, releases, and the new pod gets token 2", func() {
		create(20)
		holders := startHolders(ns, true)
		d := rollingDeployment(ns)
		Expect(k8s.Create(ctx, d)).To(Succeed())
		old := expectHolderRunning(ns, 1, "example.invalid/scheduler:v1")

		By("rolling to v2: the new pod waits, gated, and the holder is asked to hand off to it")
		updated := rollTo(d, "example.invalid/scheduler:v2")
		next := expectHolderRunning(ns, 2, "example.invalid/scheduler:v2")
		granted := time.Since(updated)
		expectRolledOut(d)
		GinkgoWriter.Printf("RollingUpdate hand-off: update → new pod granted %v, → rollout complete %v\n", granted, time.Since(updated))

		seen, ok := holders.drainedOf(old)
		Expect(ok).To(BeTrue(), "pkg/holder signalled Draining to the old holder")
		Expect(seen.successor).To(Equal(next))
		Expect(seen.podState).To(Equal(string(fencingv1.PodDraining)), "the old pod showed Draining (its /etc/fencing/state)")
		Expect(holders.lostAt(old)).NotTo(BeZero(), "the old holder's context ended (released)")
		fl := getFL(Default, ns)
		Expect(fl.Status.Revocations).To(BeZero(), "a hand-off by release, not a revocation")
		Expect(fl.Status.Holder.Handoff).To(BeNil())
		expectGone(ns, old)
		Expect(granted).To(BeNumerically("<", 20*time.Second), "well within the grace period: the holder released")
	})

	It("cuts off a holder that does not hand off within handoffGracePeriodSeconds, revokes it once its lease ran out, and the rollout completes", func() {
		create(2)
		holders := startHolders(ns, false) // asked, it keeps renewing
		d := rollingDeployment(ns)
		Expect(k8s.Create(ctx, d)).To(Succeed())
		old := expectHolderRunning(ns, 1, "example.invalid/scheduler:v1")

		updated := rollTo(d, "example.invalid/scheduler:v2")
		next := expectHolderRunning(ns, 2, "example.invalid/scheduler:v2")
		expectRolledOut(d)
		GinkgoWriter.Printf("RollingUpdate, hand-off refused: update → rollout complete %v\n", time.Since(updated))

		fl := getFL(Default, ns)
		Expect(fl.Status.LastRevocation).NotTo(BeNil())
		Expect(fl.Status.LastRevocation.Reason).To(Equal(fencingv1.ReasonHandoffTimeout))
		Expect(fl.Status.LastRevocation.PodName).To(Equal(old))
		seen, ok := holders.drainedOf(old)
		Expect(ok).To(BeTrue(), "it was asked")
		lost := holders.lostAt(old)
		Expect(lost).NotTo(BeZero(), "its renewals were refused and its context ended")
		grantedAt := fl.Status.Holder.AcquireTime.Time
		Expect(fl.Status.Holder.PodName).To(Equal(next))
		// The safety the wait buys: the old holder's own deadline ended its work before
		// anyone else was granted; and not before the grace period was over.
		Expect(lost).To(BeTemporally("<", grantedAt), "the old holder stopped before the new pod was granted")
		Expect(grantedAt.Sub(seen.at)).To(BeNumerically(">=", 2*time.Second-200*time.Millisecond), "the grace period was given")
		GinkgoWriter.Printf("asked → old holder stopped %v, → new pod granted %v\n", lost.Sub(seen.at), grantedAt.Sub(seen.at))
	})

	It("completes a 2-replica StatefulSet's rolling update (Parallel): the holder hands off to the updated standby", func() {
		create(20)
		holders := startHolders(ns, true)
		s := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scheduler"},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](2), ServiceName: "scheduler",
				// OrderedReady would wait forever for the gated standby to become Ready.
				PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector:            &metav1.LabelSelector{MatchLabels: template("").Labels}, Template: template("example.invalid/scheduler:v1"),
			},
		}
		Expect(k8s.Create(ctx, s)).To(Succeed())
		first := expectHolderRunning(ns, 1, "example.invalid/scheduler:v1")
		// Parallel pod management deletes every old-revision pod that is not Ready at once
		// (the StatefulSet controller's first phase): roll only once the holder is Ready,
		// or the update takes it away before it could be asked to hand off.
		Eventually(func(g Gomega) {
			p := &corev1.Pod{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: first}, p)).To(Succeed())
			g.Expect(p.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		By("rolling to v2: the standby is replaced first, and the holder hands off to it")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		s.Spec.Template.Spec.Containers[0].Image = "example.invalid/scheduler:v2"
		Expect(k8s.Update(ctx, s)).To(Succeed())
		next := expectHolderRunning(ns, 2, "example.invalid/scheduler:v2")
		Expect(next).NotTo(Equal(first))
		seen, ok := holders.drainedOf(first)
		Expect(ok).To(BeTrue(), "the holder was asked to hand off")
		Expect(seen.successor).To(Equal(next))
		// Both pods are of the new revision. (The StatefulSet never reports the rollout
		// complete: that needs every replica Ready, and a standby waits, gated.)
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			g.Expect(s.Status.UpdatedReplicas).To(BeEquivalentTo(2))
			for _, name := range []string{"scheduler-0", "scheduler-1"} {
				g.Expect(get(g, ns, name).Labels).To(HaveKeyWithValue(appsv1.ControllerRevisionHashLabelKey, s.Status.UpdateRevision))
			}
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		fl := getFL(Default, ns)
		Expect(fl.Status.Revocations).To(BeZero())
		Expect(fl.Status.Holder.PodName).To(Equal(next), "the updated pod that replaced the old holder waits, not hands back")
	})
})
