package authority

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

var _ = Describe("FencedLease finalizer webhook", func() {
	It("puts the operator's finalizer on an editor's new FencedLease at its creation, after the editor's own, never twice", func() {
		w := newWorld()
		fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "invoices", Finalizers: []string{"example.com/keep"}}}
		Expect(w.editor.Create(ctx, fl)).To(Succeed())
		Expect(fl.Finalizers).To(Equal([]string{"example.com/keep", fencingv1.Finalizer}),
			"the creation's answer shows it: the object was stored with it, before the operator saw it")

		own := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "own", Finalizers: []string{fencingv1.Finalizer}}}
		Expect(w.editor.Create(ctx, own)).To(Succeed())
		Expect(own.Finalizers).To(Equal([]string{fencingv1.Finalizer}), "never twice")
	})

	It("leaves an update alone: an update that drops the finalizer is stored without it (the operator, not the webhook, puts it back on a live FencedLease)", func() {
		w := newWorld()
		fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "invoices"}}
		Expect(w.editor.Create(ctx, fl)).To(Succeed())
		Expect(fl.Finalizers).To(ConsistOf(fencingv1.Finalizer))
		Expect(update(w.admin, fl, func(f *fencingv1.FencedLease) { f.Finalizers = nil })).To(Succeed())
		Expect(fl.Finalizers).To(BeEmpty(), "the update's answer: stored as written")
	})
})
