package fencedlease_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

var _ = Describe("Lock-delay (issue 24, item 6)", func() {
	It("grants the next pod only revocationDelaySeconds after an expiry, and says so meanwhile", func() {
		const delay = 2 * time.Second
		ns := newNamespace()
		startController(ns, controllerOpts{id: "ctrl"})
		fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 1, StartupDeadlineSeconds: 1, RevocationDelaySeconds: 2}}
		Expect(k8s.Create(ctx, fl)).To(Succeed())
		createPod(ns, "a", "invoices")
		createPod(ns, "b", "invoices")
		expectHolder(ns, "invoices", "a", 1)
		renew(ns, "invoices") // then silent

		By("revoked at expiry, and b waits, Held saying why and until when")
		Eventually(func(g Gomega) {
			got := &fencingv1.FencedLease{}
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "invoices"}, got)).To(Succeed())
			g.Expect(got.Status.LastRevocation).NotTo(BeNil())
			g.Expect(got.Status.Holder).To(BeNil())
			held := meta.FindStatusCondition(got.Status.Conditions, fencingv1.ConditionHeld)
			g.Expect(held).NotTo(BeNil())
			g.Expect(held.Reason).To(Equal(fencingv1.ReasonRevocationDelayed))
			g.Expect(held.Message).To(ContainSubstring("not before"))
			fl = got
		}).WithTimeout(timeout).WithPolling(10 * time.Millisecond).Should(Succeed())
		rv := fl.Status.LastRevocation
		Expect(rv.Reason).To(Equal(fencingv1.ReasonLeaseExpired))
		Expect(rv.DelaySeconds).To(BeEquivalentTo(2))
		Expect(rv.NextGrantTime.Sub(rv.Time.Time)).To(Equal(delay))

		next := expectHolder(ns, "invoices", "b", 2)
		waited := next.Status.Holder.AcquireTime.Sub(rv.Time.Time)
		GinkgoWriter.Printf("revocation → next grant: %v (lock-delay %v)\n", waited, delay)
		Expect(waited).To(BeNumerically(">=", delay), "granted before the lock-delay ended")
		Expect(waited).To(BeNumerically("<", delay+2*time.Second), "granted long after the lock-delay ended")
	})
})
