package fencedlease_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

var _ = Describe("Deletion and re-creation", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		startController(ns, controllerOpts{id: "ctrl"})
	})

	It("revokes the holder on deletion, keeps the Lease as tombstone, and continues above it", func() {
		createFL(ns, "invoices", 15, fencingv1.KeepPodPolicy)
		createPod(ns, "a", "invoices")
		createPod(ns, "b", "invoices")
		expectHolder(ns, "invoices", "a", 1)
		setPhase(ns, "a", "Succeeded")
		expectHolder(ns, "invoices", "b", 2)

		By("deleting the FencedLease")
		Expect(k8s.Delete(ctx, getFL(ns, "invoices"))).To(Succeed())
		Eventually(func() bool {
			err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "invoices"}, &fencingv1.FencedLease{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue())
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, ns, "b").Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodRevoked)))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		l := getLease(Default, ns, "invoices")
		Expect(l.Spec.HolderIdentity).To(BeNil())
		Expect(l.Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, "2"))

		By("re-creating it: the next token is above every earlier one")
		createPod(ns, "c", "invoices")
		createFL(ns, "invoices", 15, fencingv1.KeepPodPolicy)
		fl := expectHolder(ns, "invoices", "c", 3)
		Expect(fl.Status.Transitions).To(BeEquivalentTo(1), "transitions count this FencedLease's grants")
		Consistently(func(g Gomega) {
			g.Expect(getPod(g, ns, "b").Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, "2"))
			g.Expect(getPod(g, ns, "b").Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodRevoked)))
		}).WithTimeout(500 * time.Millisecond).WithPolling(poll).Should(Succeed())
	})
})
