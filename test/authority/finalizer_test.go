package authority

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// With no webhook installed, the operator puts its finalizer on every FencedLease itself.
var _ = Describe("The operator's finalizer, with no webhook", func() {
	finalizers := func(fl *fencingv1.FencedLease) func() []string {
		return func() []string {
			got := &fencingv1.FencedLease{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(fl), got); err != nil {
				return nil
			}
			return got.Finalizers
		}
	}

	It("is put on an editor's new FencedLease by the operator, after the editor's own, once", func() {
		w := newWorld()
		fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "invoices", Finalizers: []string{"example.com/keep"}}}
		Expect(w.editor.Create(ctx, fl)).To(Succeed())
		Expect(fl.Finalizers).To(Equal([]string{"example.com/keep"}), "stored as written: nothing mutates a FencedLease at creation")
		Eventually(finalizers(fl)).WithTimeout(timeout).WithPolling(poll).Should(Equal([]string{"example.com/keep", fencingv1.Finalizer}))

		own := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "own", Finalizers: []string{fencingv1.Finalizer}}}
		Expect(w.editor.Create(ctx, own)).To(Succeed())
		Consistently(finalizers(own)).WithTimeout(time.Second).WithPolling(poll).Should(Equal([]string{fencingv1.Finalizer}), "never twice")
	})

	It("is put back by the operator when an update drops it from a live FencedLease", func() {
		w := newWorld()
		fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "invoices"}}
		Expect(w.editor.Create(ctx, fl)).To(Succeed())
		Eventually(finalizers(fl)).WithTimeout(timeout).WithPolling(poll).Should(ConsistOf(fencingv1.Finalizer))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(fl), fl)).To(Succeed())
		Expect(update(w.admin, fl, func(f *fencingv1.FencedLease) { f.Finalizers = nil })).To(Succeed())
		Eventually(finalizers(fl)).WithTimeout(timeout).WithPolling(poll).Should(ConsistOf(fencingv1.Finalizer))
	})
})
