package policy

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

var _ = Describe("FencedLease finalizer policy", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("puts the operator's finalizer on a FencedLease at its creation, by anyone, so the operator need not write it", func() {
		bind(ns, "editor-role", rbacv1.Subject{Kind: "User", Name: "carol"})
		fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices", Finalizers: []string{"example.com/keep"}}}
		Expect(asUser("carol").Create(ctx, fl)).To(Succeed(), "an editor of the namespace creates it")
		Expect(fl.Finalizers).To(Equal([]string{"example.com/keep", fencingv1.Finalizer}), "the creation's answer shows it: the object was stored with it")

		own := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own", Finalizers: []string{fencingv1.Finalizer}}}
		Expect(admin.Create(ctx, own)).To(Succeed())
		Expect(own.Finalizers).To(Equal([]string{fencingv1.Finalizer}), "never twice")
	})

	It("does not put it back once it is removed: the operator removes it when a deleted FencedLease's holder is revoked", func() {
		fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"}}
		Expect(admin.Create(ctx, fl)).To(Succeed())
		Expect(fl.Finalizers).To(ConsistOf(fencingv1.Finalizer))
		Expect(admin.Delete(ctx, fl)).To(Succeed())
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(fl), fl)).To(Succeed(), "the finalizer holds the deletion for the operator")
		Expect(fl.DeletionTimestamp).NotTo(BeNil())

		fl.Finalizers = nil
		Expect(admin.Update(ctx, fl)).To(Succeed(), "the operator's last write")
		Eventually(func() bool {
			return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(fl), &fencingv1.FencedLease{}))
		}).WithTimeout(10*time.Second).Should(BeTrue(), "the FencedLease is gone")

		By("an update that drops it from a live FencedLease is left alone too: the operator adds it back itself")
		live := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "live"}}
		Expect(admin.Create(ctx, live)).To(Succeed())
		live.Finalizers = nil
		Expect(admin.Update(ctx, live)).To(Succeed())
		Expect(live.Finalizers).To(BeEmpty())
	})
})
