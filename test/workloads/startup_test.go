package workloads

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/cluster"
)

func getFL(g Gomega, ns string) *fencingv1.FencedLease {
	fl := &fencingv1.FencedLease{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, fl)).To(Succeed())
	return fl
}

var _ = Describe("Slow starts (issue 8, section 2)", func() {
	It("does not revoke a holder whose start takes longer than its lease, and judges it by the lease from its first renewal", func() {
		const lease, slowStart = 2 * time.Second, 6 * time.Second
		ns := newNamespace()
		Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 2, StartupDeadlineSeconds: 60}})).To(Succeed())
		a := pod(ns, "a")
		a.Annotations = map[string]string{cluster.StartAfterAnnotation: slowStart.String()} // a slow image pull
		Expect(k8s.Create(ctx, a)).To(Succeed())
		Expect(k8s.Create(ctx, pod(ns, "b"))).To(Succeed())

		By("granted and bound, but its containers not started yet")
		Eventually(func(g Gomega) {
			p := get(g, ns, "a")
			g.Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, "1"))
			g.Expect(p.Spec.NodeName).NotTo(BeEmpty())
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		// The Lease names a first; the status records it within half the lease (G4).
		Eventually(func(g Gomega) { g.Expect(getFL(g, ns).Status.Holder).NotTo(BeNil()) }).
			WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) {
			fl := getFL(g, ns)
			g.Expect(fl.Status.Holder).NotTo(BeNil())
			g.Expect(fl.Status.Holder.PodName).To(Equal("a"))
			g.Expect(fl.Status.Revocations).To(BeZero())
		}).WithTimeout(2*lease).WithPolling(poll).Should(Succeed(), "revoked while it was still starting")

		By("running at last, it renews for the first time (as its agent would)")
		Eventually(func(g Gomega) { g.Expect(get(g, ns, "a").Status.Phase).To(Equal(corev1.PodRunning)) }).
			WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		l := &coordinationv1.Lease{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, l)).To(Succeed())
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		renewed := time.Now()
		Expect(k8s.Update(ctx, l)).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(getFL(g, ns).Status.Holder.FirstRenewTime).NotTo(BeNil()) }).
			WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		By("then silent: revoked one lease after that renewal, not at the startup deadline")
		Eventually(func(g Gomega) {
			rv := getFL(g, ns).Status.LastRevocation
			g.Expect(rv).NotTo(BeNil())
			g.Expect(rv.Reason).To(Equal(fencingv1.ReasonLeaseExpired))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		rv := getFL(Default, ns).Status.LastRevocation
		Expect(rv.Time.Sub(renewed)).To(BeNumerically(">=", lease-100*time.Millisecond), "revoked before its lease ran out")
		Expect(rv.Time.Sub(renewed)).To(BeNumerically("<", 10*lease), "judged by the startup deadline instead of the lease")
		GinkgoWriter.Printf("first renewal → revocation: %v (lease %v)\n", rv.Time.Sub(renewed), lease)
	})
})
