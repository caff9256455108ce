package fencedlease_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

var _ = Describe("Expiry and revocation", func() {
	var ns string
	var reg *prometheus.Registry
	BeforeEach(func() {
		ns = newNamespace()
		reg = prometheus.NewRegistry()
		startController(ns, controllerOpts{id: "ctrl", registry: reg})
	})

	// The stale-holder timeline: A holds token N and stops renewing (a pause, a crash, a
	// partition); after the lease duration A is revoked and B holds N+1; what A writes
	// afterwards changes nothing.
	DescribeTable("revokes a holder that stops renewing and grants the next token",
		func(policy fencingv1.RevocationPolicy) {
			const duration = 2 * time.Second
			createFL(ns, "invoices", 2, policy)
			createPod(ns, "a", "invoices")
			createPod(ns, "b", "invoices")
			expectHolder(ns, "invoices", "a", 1)

			By("A renewing twice, then going silent")
			renew(ns, "invoices")
			lastRenew := renew(ns, "invoices")
			staleLease := &coordinationv1.Lease{}
			Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "invoices"}, staleLease)).To(Succeed())

			fl := expectHolder(ns, "invoices", "b", 2)
			rv := fl.Status.LastRevocation
			Expect(rv).NotTo(BeNil())
			Expect(rv.PodName).To(Equal("a"))
			Expect(rv.Token).To(BeEquivalentTo(1))
			Expect(rv.Reason).To(Equal(fencingv1.ReasonLeaseExpired))
			Expect(fl.Status.Revocations).To(BeEquivalentTo(1))
			Expect(fl.Status.Transitions).To(BeEquivalentTo(2))
			late := rv.Time.Sub(lastRenew)
			Expect(late).To(BeNumerically(">=", duration), "revoked before the lease duration had passed")
			Expect(late).To(BeNumerically("<", duration+time.Second), "revoked long after expiry")
			GinkgoWriter.Printf("renewal→revocation: %v (duration %v)\n", late, duration)
			series := map[string]string{"namespace": ns, "name": "invoices"}
			// This controller's registry sees this namespace only: the aggregates are its own.
			Expect(metric(reg, "fencedlease_revocations_total", map[string]string{"reason": "LeaseExpired"})).To(BeEquivalentTo(1))
			Expect(metric(reg, "fencedlease_revocation_lateness_seconds", nil)).To(BeEquivalentTo(1))
			Expect(metric(reg, "fencedlease_grants_total", nil)).To(BeEquivalentTo(2))
			Expect(metric(reg, "fencedlease_grant_wait_seconds", nil)).To(BeEquivalentTo(2))
			Expect(metric(reg, "fencedlease_fencing_token", series)).To(BeEquivalentTo(2))

			if policy == fencingv1.DeletePodPolicy {
				Eventually(func() bool { return podGone(ns, "a") }).WithTimeout(timeout).WithPolling(poll).Should(BeTrue())
			} else {
				Eventually(func(g Gomega) {
					p := getPod(g, ns, "a")
					g.Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodRevoked)))
					g.Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, "1"))
					g.Expect(p.DeletionTimestamp).To(BeNil())
				}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			}

			By("A's late renewal, written with the Lease it last saw, being refused")
			staleLease.Spec.RenewTime.Time = time.Now()
			Expect(apierrors.IsConflict(k8s.Update(ctx, staleLease))).To(BeTrue())

			By("A overwriting the Lease anyway (a rogue client) changing nothing that counts")
			Eventually(func(g Gomega) {
				l := getLease(g, ns, "invoices")
				l.Spec.HolderIdentity = ptr.To("a")
				l.Annotations[fencingv1.TokenAnnotation] = "1"
				l.Annotations[fencingv1.HolderUIDAnnotation] = string(rv.PodUID)
				g.Expect(k8s.Update(ctx, l)).To(Succeed())
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			after := expectHolder(ns, "invoices", "b", 2)
			Expect(after.Status.Holder.PodUID).To(Equal(fl.Status.Holder.PodUID))
			Expect(after.Status.Holder.AcquireTime).To(Equal(fl.Status.Holder.AcquireTime))
			Expect(after.Status.Revocations).To(BeEquivalentTo(1))
			Expect(after.Status.Transitions).To(BeEquivalentTo(2))
			if policy == fencingv1.KeepPodPolicy {
				Consistently(func(g Gomega) {
					g.Expect(getPod(g, ns, "a").Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodRevoked)))
				}).WithTimeout(500 * time.Millisecond).WithPolling(poll).Should(Succeed())
			}
		},
		Entry("DeletePod deletes A", fencingv1.DeletePodPolicy),
		Entry("KeepPod keeps A, marked Revoked", fencingv1.KeepPodPolicy),
	)

	It("never revokes a holder that keeps renewing", func() {
		createFL(ns, "invoices", 1, fencingv1.DeletePodPolicy)
		createPod(ns, "a", "invoices")
		createPod(ns, "b", "invoices")
		expectHolder(ns, "invoices", "a", 1)
		stop := keepRenewing(ns, "invoices", 300*time.Millisecond)
		defer stop()
		Consistently(func(g Gomega) {
			fl := getFL(ns, "invoices")
			g.Expect(fl.Status.Holder).NotTo(BeNil())
			g.Expect(fl.Status.Holder.PodName).To(Equal("a"))
			g.Expect(fl.Status.FencingToken).To(BeEquivalentTo(1))
			g.Expect(fl.Status.Revocations).To(BeZero())
			expectWaiting(g, ns, "b")
		}).WithTimeout(4 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		Expect(getFL(ns, "invoices").Status.Holder.LastRenewTime.Time).To(BeTemporally(">", getFL(ns, "invoices").Status.Holder.AcquireTime.Time))
	})
})
