package workloads

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/cluster"
)

var _ = Describe("Grants that cannot start (issue 21, item 5)", func() {
	create := func(ns string, mode fencingv1.StandbyMode) {
		Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 3, StartupDeadlineSeconds: 300, Standby: mode}})).To(Succeed())
	}
	stuck := func(ns, name, reason string) {
		GinkgoHelper()
		p := pod(ns, name)
		p.Annotations = map[string]string{cluster.WaitingReasonAnnotation: reason}
		Expect(k8s.Create(ctx, p)).To(Succeed())
	}

	for _, reason := range []string{"ImagePullBackOff", "CrashLoopBackOff", "CreateContainerConfigError"} {
		It("revokes a granted Cold pod whose container waits in "+reason+" in seconds, not at the 300 s startup deadline, deletes it, and grants the next", func() {
			ns := newNamespace()
			create(ns, fencingv1.StandbyCold)
			startHolders(ns, false)
			stuck(ns, "bad", reason)
			created := time.Now()
			Expect(k8s.Create(ctx, pod(ns, "good"))).To(Succeed())
			expectHolderRunning(ns, 2, "example.invalid/work")
			took := time.Since(created)
			fl := getFL(Default, ns)
			rv := fl.Status.LastRevocation
			Expect(rv).NotTo(BeNil())
			Expect(rv.PodName).To(Equal("bad"))
			Expect(rv.Reason).To(Equal(fencingv1.ReasonPodCannotStart))
			Expect(rv.Message).To(ContainSubstring(reason))
			expectGone(ns, "bad")
			GinkgoWriter.Printf("%s: bad pod created → good pod holds token 2 and runs: %v\n", reason, took)
			Expect(took).To(BeNumerically("<", 60*time.Second), "far short of the startup deadline")
		})
	}

	It("does not revoke a slow but healthy start (containers still being created)", func() {
		ns := newNamespace()
		create(ns, fencingv1.StandbyCold)
		stuck(ns, "slow", "ContainerCreating")
		Expect(k8s.Create(ctx, pod(ns, "waiting"))).To(Succeed()) // same second: ties go by name, slow first
		Eventually(func(g Gomega) {
			p := get(g, ns, "slow")
			g.Expect(p.Status.ContainerStatuses).NotTo(BeEmpty())
			g.Expect(p.Status.ContainerStatuses[0].State.Waiting).NotTo(BeNil())
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		// The status records the grant with its first renewal, or within 2 s without one.
		Eventually(func(g Gomega) {
			g.Expect(getFL(g, ns).Status.Holder).NotTo(BeNil())
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) {
			fl := getFL(g, ns)
			g.Expect(fl.Status.Holder).NotTo(BeNil())
			g.Expect(fl.Status.Holder.PodName).To(Equal("slow"))
			g.Expect(fl.Status.Revocations).To(BeZero())
		}).WithTimeout(5 * time.Second).WithPolling(poll).Should(Succeed())
	})

	It("never grants a Warm standby that shows it cannot start; the next healthy one is granted", func() {
		ns := newNamespace()
		create(ns, fencingv1.StandbyWarm)
		hs := startWarmHolders(ns)
		Expect(k8s.Create(ctx, pod(ns, "a"))).To(Succeed())
		expectWarmHolder(ns, hs, 1, "example.invalid/work")
		stuck(ns, "bad", "ImagePullBackOff")
		Eventually(func(g Gomega) {
			p := get(g, ns, "bad")
			g.Expect(p.Status.ContainerStatuses).NotTo(BeEmpty())
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Expect(k8s.Create(ctx, pod(ns, "c"))).To(Succeed())

		By("the holder goes; the bad standby, older than c, is passed over")
		Expect(k8s.Delete(ctx, get(Default, ns, "a"))).To(Succeed())
		Eventually(func(g Gomega) {
			fl := getFL(g, ns)
			g.Expect(fl.Status.Holder).NotTo(BeNil())
			g.Expect(fl.Status.Holder.PodName).To(Equal("c"))
			g.Expect(fl.Status.Holder.Token).To(BeEquivalentTo(2))
			g.Expect(fl.Status.Revocations).To(BeZero())
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Expect(get(Default, ns, "bad").Annotations).NotTo(HaveKey(fencingv1.TokenAnnotation))
	})
})
