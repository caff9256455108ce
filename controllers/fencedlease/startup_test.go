package fencedlease_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

var _ = Describe("Startup deadline (issue 8, section 2)", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		startController(ns, controllerOpts{id: "ctrl"})
	})

	heldMessage := func(g Gomega) string {
		c := meta.FindStatusCondition(getFL(ns, "invoices").Status.Conditions, fencingv1.ConditionHeld)
		g.Expect(c).NotTo(BeNil())
		return c.Message
	}

	// Checks X6.
	It("judges a grant by its startup deadline until the first renewal, then by the lease; a pod that never renewed is deleted even under KeepPod", func() {
		const lease, startup = 1 * time.Second, 3 * time.Second
		Expect(k8s.Create(ctx, &fencingv1.FencedLease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 1, StartupDeadlineSeconds: 3,
				RevocationPolicy: fencingv1.KeepPodPolicy},
		})).To(Succeed())
		createPod(ns, "a", "invoices")
		createPod(ns, "b", "invoices")
		fl := expectHolder(ns, "invoices", "a", 1)
		Expect(fl.Status.Holder.StartupDeadlineSeconds).To(BeEquivalentTo(3))
		granted := fl.Status.Holder.AcquireTime.Time

		By("a slow start: no renewal for twice the lease, and no revocation")
		Consistently(func(g Gomega) {
			fl := getFL(ns, "invoices")
			g.Expect(fl.Status.Holder.PodName).To(Equal("a"))
			g.Expect(fl.Status.Revocations).To(BeZero())
			g.Expect(heldMessage(g)).To(ContainSubstring("starting"))
		}).WithTimeout(2 * lease).WithPolling(poll).Should(Succeed())

		By("never renewing: revoked at the startup deadline, and deleted although the policy keeps revoked pods")
		fl = expectHolder(ns, "invoices", "b", 2)
		rv := fl.Status.LastRevocation
		Expect(rv.Reason).To(Equal(fencingv1.ReasonStartupDeadlineExceeded))
		Expect(rv.Time.Sub(granted)).To(BeNumerically(">=", startup), "revoked before the startup deadline")
		Expect(rv.Time.Sub(granted)).To(BeNumerically("<", startup+2*time.Second), "revoked long after the startup deadline")
		Eventually(func() bool { return podGone(ns, "a") }).WithTimeout(timeout).WithPolling(poll).Should(BeTrue())

		By("b renews once: started, and from then on the 1s lease applies")
		renew(ns, "invoices")
		Eventually(func(g Gomega) {
			g.Expect(getFL(ns, "invoices").Status.Holder.FirstRenewTime).NotTo(BeNil())
			g.Expect(heldMessage(g)).NotTo(ContainSubstring("starting"))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			fl := getFL(ns, "invoices")
			g.Expect(fl.Status.LastRevocation.PodName).To(Equal("b"))
			g.Expect(fl.Status.LastRevocation.Reason).To(Equal(fencingv1.ReasonLeaseExpired))
		}).WithTimeout(startup).WithPolling(poll).Should(Succeed(), "a started holder is judged by its 1s lease, not the 3s startup deadline")
		// The pod is marked after the status records the revocation.
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, ns, "b").Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodRevoked)))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(getPod(g, ns, "b").DeletionTimestamp).To(BeNil(), "KeepPod keeps a pod that ran")
		}).WithTimeout(500 * time.Millisecond).WithPolling(poll).Should(Succeed())
	})
})
