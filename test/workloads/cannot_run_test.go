package workloads

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

var _ = Describe("A holder whose container cannot run while it renews (issue 47, item 3)", func() {
	const lease = 3 * time.Second
	create := func(ns string) {
		Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: int32(lease / time.Second), StartupDeadlineSeconds: 300}})).To(Succeed())
	}
	// report writes the container status a kubelet would report for pod name's container,
	// as kwok leaves a running pod's status alone.
	report := func(ns, name string, state corev1.ContainerState, restarts int32, last corev1.ContainerStateTerminated) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			p := get(g, ns, name)
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			c := &p.Status.ContainerStatuses[0]
			c.State, c.RestartCount = state, restarts
			c.LastTerminationState = corev1.ContainerState{Terminated: &last}
			c.Ready = state.Running != nil
			g.Expect(k8s.Status().Update(ctx, p)).To(Succeed())
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	}
	lastExit := func(reason string, code int32) corev1.ContainerStateTerminated {
		now := metav1.Now()
		return corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, StartedAt: now, FinishedAt: now}
	}

	It("cuts off a renewing holder in CrashLoopBackOff at once, revokes it as PodCannotRun when its lease ran out, and grants the next", func() {
		ns := newNamespace()
		create(ns)
		hs := startHolders(ns, false) // renews for the granted pod whatever its container does, as a sidecar
		Expect(k8s.Create(ctx, pod(ns, "crashing"))).To(Succeed())
		expectHolderRunning(ns, 1, "example.invalid/work")
		Expect(k8s.Create(ctx, pod(ns, "good"))).To(Succeed())

		crashed := time.Now()
		report(ns, "crashing", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: "back-off 20s restarting failed container"}}, 2, lastExit("Error", 1))

		By("the Lease names no holder and says why, before the lease could have run out")
		Eventually(func(g Gomega) {
			l := &coordinationv1.Lease{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, l)).To(Succeed())
			g.Expect(ptr.Deref(l.Spec.HolderIdentity, "")).To(BeEmpty())
			g.Expect(l.Annotations).To(HaveKeyWithValue(fencingv1.CutOffReasonAnnotation, string(fencingv1.ReasonPodCannotRun)))
		}).WithTimeout(timeout).WithPolling(50 * time.Millisecond).Should(Succeed())
		cutOff := time.Since(crashed)
		// The back-off ends before the lease does: the container runs again, and crashes.
		report(ns, "crashing", corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}, 3, lastExit("Error", 1))

		By("revoked as PodCannotRun, the pod deleted, the next pod holds token 2 and renews")
		expectHolderRunning(ns, 2, "example.invalid/work")
		took := time.Since(crashed)
		rv := getFL(Default, ns).Status.LastRevocation
		Expect(rv).NotTo(BeNil())
		Expect(rv.PodName).To(Equal("crashing"))
		Expect(rv.Reason).To(Equal(fencingv1.ReasonPodCannotRun))
		Expect(rv.Message).To(Equal("container work: restarted; last exit: Error, code 1, 3 restarts"), "how it last ended, though running again")
		expectGone(ns, "crashing")
		Expect(hs.lostAt("crashing")).NotTo(BeZero(), "the crashing pod's holder learnt its renewals are refused")
		Eventually(func(g Gomega) {
			l := &coordinationv1.Lease{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, l)).To(Succeed())
			g.Expect(l.Annotations).NotTo(HaveKey(fencingv1.CutOffReasonAnnotation), "the next grant clears why the last was cut off")
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		events := &corev1.EventList{}
		Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		Expect(events.Items).To(ContainElement(And(
			HaveField("Reason", string(fencingv1.ReasonPodCannotRun)), HaveField("Type", corev1.EventTypeWarning),
			HaveField("InvolvedObject.Name", "crashing"))))
		GinkgoWriter.Printf("CrashLoopBackOff reported → cut off %v, next pod holds token 2 and runs %v (lease %v)\n", cutOff, took, lease)
		Expect(cutOff).To(BeNumerically("<", 20*time.Second))
		Expect(took).To(BeNumerically("<", 30*time.Second), "the crashing pod's renewals would have kept it for good")
	})

	It("keeps the grant of a holder whose container restarted once (an OOM kill) and runs again", func() {
		ns := newNamespace()
		create(ns)
		startHolders(ns, false)
		Expect(k8s.Create(ctx, pod(ns, "a"))).To(Succeed())
		expectHolderRunning(ns, 1, "example.invalid/work")
		report(ns, "a", corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}, 1, lastExit("OOMKilled", 137))
		Consistently(func(g Gomega) {
			fl := getFL(g, ns)
			g.Expect(fl.Status.Holder).NotTo(BeNil())
			g.Expect(fl.Status.Holder.PodName).To(Equal("a"))
			g.Expect(fl.Status.Holder.Token).To(BeEquivalentTo(1))
			g.Expect(fl.Status.Revocations).To(BeZero())
		}).WithTimeout(3 * lease).WithPolling(poll).Should(Succeed())
	})
})
