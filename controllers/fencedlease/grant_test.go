package fencedlease_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

var _ = Describe("Grant and release", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		startController(ns, controllerOpts{id: "ctrl"})
	})

	// Checks G3.
	It("grants token 1 to the first candidate; status, Lease and pod agree and the gate is removed", func() {
		createFL(ns, "invoices", 15, fencingv1.DeletePodPolicy)
		createPod(ns, "p1", "invoices")
		fl := expectHolder(ns, "invoices", "p1", 1)

		Expect(fl.Status.Transitions).To(BeEquivalentTo(1))
		Expect(fl.Status.Waiting).To(BeEquivalentTo(0))
		Expect(fl.Status.Holder.LastRenewTime).NotTo(BeNil())
		held := meta.FindStatusCondition(fl.Status.Conditions, fencingv1.ConditionHeld)
		Expect(held).NotTo(BeNil())
		Expect(held.Status).To(Equal(metav1.ConditionTrue))
		Expect(held.Reason).To(Equal(fencingv1.ReasonGranted))
		Expect(fl.Finalizers).To(ContainElement(fencingv1.Finalizer))

		l := &coordinationv1.Lease{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "invoices"}, l)).To(Succeed())
		Expect(l.Spec.LeaseDurationSeconds).To(HaveValue(BeEquivalentTo(15)))
		Expect(l.Spec.LeaseTransitions).To(HaveValue(BeEquivalentTo(1)))
		Expect(l.Spec.AcquireTime).NotTo(BeNil())
		Expect(l.OwnerReferences).To(BeEmpty(), "the Lease must survive the FencedLease as its tombstone")

		By("recording Granted events on the FencedLease and on the pod")
		Eventually(func(g Gomega) {
			events := &eventsv1.EventList{}
			g.Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
			on := map[string]bool{}
			for _, e := range events.Items {
				if e.Reason == "Granted" {
					on[e.Regarding.Kind+"/"+e.Regarding.Name] = true
				}
			}
			g.Expect(on).To(HaveKey("FencedLease/invoices"))
			g.Expect(on).To(HaveKey("Pod/p1"))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})

	// Checks L1, L2, L3.
	It("hands over in FIFO order when the holder succeeds, is deleted, or releases its Lease", func() {
		createFL(ns, "invoices", 15, fencingv1.DeletePodPolicy)
		// Creation times tie within a second; the name breaks ties, so p1 < p2 < p3.
		for _, p := range []string{"p1", "p2", "p3"} {
			createPod(ns, p, "invoices")
		}
		expectHolder(ns, "invoices", "p1", 1)
		Eventually(func() int32 { return getFL(ns, "invoices").Status.Waiting }).WithTimeout(timeout).WithPolling(poll).Should(BeEquivalentTo(2))
		Consistently(func(g Gomega) { expectWaiting(g, ns, "p2"); expectWaiting(g, ns, "p3") }).
			WithTimeout(500 * time.Millisecond).WithPolling(poll).Should(Succeed())

		By("the holder finishing")
		setPhase(ns, "p1", corev1.PodSucceeded)
		fl := expectHolder(ns, "invoices", "p2", 2)
		Expect(fl.Status.Waiting).To(BeEquivalentTo(1))
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, ns, "p1").Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodReleased)))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		By("the holder being deleted")
		deletePod(ns, "p2")
		fl = expectHolder(ns, "invoices", "p3", 3)
		Expect(fl.Status.Waiting).To(BeEquivalentTo(0))

		By("the holder clearing holderIdentity on its own Lease")
		Eventually(func(g Gomega) {
			l := getLease(g, ns, "invoices")
			l.Spec.HolderIdentity = nil
			g.Expect(k8s.Update(ctx, l)).To(Succeed())
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			fl := getFL(ns, "invoices")
			g.Expect(fl.Status.Holder).To(BeNil())
			g.Expect(fl.Status.FencingToken).To(BeEquivalentTo(3))
			held := meta.FindStatusCondition(fl.Status.Conditions, fencingv1.ConditionHeld)
			g.Expect(held.Reason).To(Equal(fencingv1.ReasonNoCandidates))
			g.Expect(getPod(g, ns, "p3").Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodReleased)))
			l := getLease(g, ns, "invoices")
			g.Expect(l.Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, "3"))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Expect(getFL(ns, "invoices").Status.Revocations).To(BeEquivalentTo(0))

		By("a released pod never being granted again")
		createPod(ns, "p4", "invoices")
		expectHolder(ns, "invoices", "p4", 4)
	})

	It("grants nothing while suspended and says so, then grants when resumed", func() {
		fl := createFL(ns, "invoices", 15, fencingv1.DeletePodPolicy)
		fl.Spec.Suspend = true
		Expect(k8s.Update(ctx, fl)).To(Succeed())
		createPod(ns, "p1", "invoices")
		Eventually(func(g Gomega) {
			fl := getFL(ns, "invoices")
			held := meta.FindStatusCondition(fl.Status.Conditions, fencingv1.ConditionHeld)
			g.Expect(held).NotTo(BeNil())
			g.Expect(held.Reason).To(Equal(fencingv1.ReasonSuspended))
			g.Expect(fl.Status.Waiting).To(BeEquivalentTo(1))
			g.Expect(fl.Status.ObservedGeneration).To(Equal(fl.Generation))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) { expectWaiting(g, ns, "p1") }).
			WithTimeout(time.Second).WithPolling(poll).Should(Succeed())

		fl = getFL(ns, "invoices")
		fl.Spec.Suspend = false
		Expect(k8s.Update(ctx, fl)).To(Succeed())
		expectHolder(ns, "invoices", "p1", 1)
	})

	It("is Ready when idle, not while its holder starts, and again once the holder renews, as kubectl wait sees it", func() {
		ready := func(g Gomega) *metav1.Condition {
			fl := getFL(ns, "invoices")
			c := meta.FindStatusCondition(fl.Status.Conditions, fencingv1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.ObservedGeneration).To(Equal(fl.Generation))
			return c
		}
		createFL(ns, "invoices", 15, fencingv1.DeletePodPolicy)
		Eventually(func(g Gomega) {
			c := ready(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(fencingv1.ReasonIdle))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		createPod(ns, "p1", "invoices")
		expectHolder(ns, "invoices", "p1", 1)
		Eventually(func(g Gomega) {
			c := ready(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(fencingv1.ReasonHolderStarting))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		renew(ns, "invoices")
		Eventually(func(g Gomega) {
			c := ready(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(fencingv1.ReasonHeld))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		By("suspended with the holder gone: Ready, as asked")
		fl := getFL(ns, "invoices")
		fl.Spec.Suspend = true
		Expect(k8s.Update(ctx, fl)).To(Succeed())
		createPod(ns, "p2", "invoices")
		setPhase(ns, "p1", corev1.PodSucceeded)
		Eventually(func(g Gomega) {
			c := ready(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(fencingv1.ReasonSuspended))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})
})
