package podwebhook_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// The webhook component's second webhook, as config/webhook installs it.
var _ = Describe("FencedLease finalizer webhook", func() {
	It("puts the operator's finalizer on a new FencedLease at its creation, after the creator's own, never twice", func() {
		ns := newNamespace()
		fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices", Finalizers: []string{"example.com/keep"}}}
		Expect(k8s.Create(ctx, fl)).To(Succeed())
		Expect(fl.Finalizers).To(Equal([]string{"example.com/keep", fencingv1.Finalizer}),
			"the creation's answer shows it: the object was stored with it, before the operator saw it")

		own := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own", Finalizers: []string{fencingv1.Finalizer}}}
		Expect(k8s.Create(ctx, own)).To(Succeed())
		Expect(own.Finalizers).To(Equal([]string{fencingv1.Finalizer}), "never twice")
	})

	It("leaves an update alone: an update that drops the finalizer is stored without it", func() {
		ns := newNamespace()
		fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"}}
		Expect(k8s.Create(ctx, fl)).To(Succeed())
		Expect(fl.Finalizers).To(ConsistOf(fencingv1.Finalizer))
		fl.Finalizers = nil
		Expect(k8s.Update(ctx, fl)).To(Succeed())
		Expect(fl.Finalizers).To(BeEmpty(), "the update's answer: stored as written")
	})
})
