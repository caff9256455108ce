package authority

import (
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

var _ = Describe("Leases (issue 7, items 3 and 4)", func() {
	var w *world
	BeforeEach(func() { w = newWorld() })

	It("lets nobody but the operator create a labeled Lease, such as one carrying the last token", func() {
		forged := func() *coordinationv1.Lease {
			return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
				Namespace: w.ns, Name: "invoices",
				Labels:      map[string]string{fencingv1.LeaseLabel: "invoices"},
				Annotations: map[string]string{fencingv1.TokenAnnotation: strconv.FormatInt(maxToken, 10)},
			}}
		}
		expectDenied(w.editor.Create(ctx, forged()), "only the operator creates Leases labeled fencing.fencedlease.io/lease (they carry fencing tokens), not erin")
		expectDenied(w.admin.Create(ctx, forged()), "not adam")
		expectDenied(w.root.Create(ctx, forged()), "not root")

		By("the FencedLease created next starts at token 1")
		w.createFL("invoices", 15)
		w.createPod("a", "invoices")
		w.expectHolder("invoices", "a", 1)
	})

	It("never adopts a Lease it did not create: LeaseConflict, nothing touched, until that Lease is gone", func() {
		By("an editor's own leader election Lease, named like the FencedLease to come")
		theirs := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "invoices",
				Annotations: map[string]string{fencingv1.TokenAnnotation: "41"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("scheduler-0"), LeaseDurationSeconds: ptr.To[int32](15)},
		}
		Expect(w.editor.Create(ctx, theirs)).To(Succeed())
		w.createFL("invoices", 15)
		w.createPod("a", "invoices")
		w.expectHeld("invoices", metav1.ConditionFalse, fencingv1.ReasonLeaseConflict,
			"Lease "+w.ns+"/invoices exists and was not created by the operator")
		Consistently(func(g Gomega) {
			l := w.lease(g, "invoices")
			g.Expect(l.ResourceVersion).To(Equal(theirs.ResourceVersion), "the operator wrote to a Lease it does not own")
			w.expectWaiting(g, "a")
			g.Expect(w.fl(g, "invoices").Status.FencingToken).To(BeZero(), "adopted the foreign Lease's token")
		}).WithTimeout(briefly).WithPolling(poll).Should(Succeed())

		By("the editor cannot turn their Lease into the operator's by labeling it")
		expectDenied(update(w.editor, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "invoices"}},
			func(l *coordinationv1.Lease) { l.Labels = map[string]string{fencingv1.LeaseLabel: "invoices"} }),
			"the labels, annotations (the fencing token, the holder UID), owner references and finalizers of this Lease are the operator's to write")

		By("once it is gone, the operator creates its own and grants token 1")
		Expect(w.editor.Delete(ctx, theirs)).To(Succeed())
		w.expectHolder("invoices", "a", 1)
		w.expectHeld("invoices", metav1.ConditionTrue, fencingv1.ReasonGranted, "pod a holds token 1")
	})

	It("never wraps a token: at the int64 limit it grants nothing and says TokensExhausted", func() {
		w.createFL("last", 15, func(fl *fencingv1.FencedLease) { fl.Spec.MinFencingToken = maxToken - 1 })
		w.createPod("a", "last")
		w.expectHolder("last", "a", maxToken)
		w.createPod("b", "last")
		w.finish("a")
		w.expectHeld("last", metav1.ConditionFalse, fencingv1.ReasonTokensExhausted, "no token is left to grant")
		Consistently(func(g Gomega) {
			w.expectWaiting(g, "b")
			g.Expect(w.fl(g, "last").Status.FencingToken).To(BeEquivalentTo(maxToken))
		}).WithTimeout(briefly).WithPolling(poll).Should(Succeed())
	})

	It("lets a deleted namespace go, with the Lease that carries its tokens", func() {
		w.createFL("invoices", 15)
		w.createPod("a", "invoices")
		w.expectHolder("invoices", "a", 1)
		nsController := asUser("system:serviceaccount:kube-system:namespace-controller", "system:serviceaccounts", "system:serviceaccounts:kube-system")
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "invoices"}}
		expectDenied(nsController.Delete(ctx, lease), "only the operator may delete this Lease")

		By("deleting the namespace; envtest has no namespace controller, so the spec plays it")
		Expect(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}})).To(Succeed())
		// The policy reads the namespace from the API server's informer, which shows the
		// deletion a moment later; the namespace controller retries as this does.
		Eventually(func() error { return nsController.Delete(ctx, lease) }).WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		for _, o := range []client.Object{
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "a"}},
			&fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "invoices"}},
		} {
			Expect(nsController.Delete(ctx, o, client.GracePeriodSeconds(0))).To(Succeed())
		}
		By("the operator revokes the holder and lets the FencedLease go: nothing is left for the namespace to wait on")
		Eventually(func(g Gomega) {
			fls := &fencingv1.FencedLeaseList{}
			g.Expect(k8s.List(ctx, fls, client.InNamespace(w.ns))).To(Succeed())
			g.Expect(fls.Items).To(BeEmpty())
			leases := &coordinationv1.LeaseList{}
			g.Expect(k8s.List(ctx, leases, client.InNamespace(w.ns))).To(Succeed())
			g.Expect(leases.Items).To(BeEmpty())
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})
})

var _ = Describe("The spec (issue 7, items 7 and 8)", func() {
	var w *world
	BeforeEach(func() { w = newWorld() })

	It("raises the token floor with minFencingToken, which may only increase", func() {
		w.createFL("invoices", 15)
		w.createPod("a", "invoices")
		w.expectHolder("invoices", "a", 1)
		fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "invoices"}}
		Expect(update(w.editor, fl, func(fl *fencingv1.FencedLease) { fl.Spec.MinFencingToken = 100 })).To(Succeed())
		By("from the next grant: the holder keeps its token, on the Lease too, where its library reads it")
		Consistently(func(g Gomega) {
			st := w.fl(g, "invoices").Status
			g.Expect(st.Holder).NotTo(BeNil())
			g.Expect(st.Holder.Token).To(BeEquivalentTo(1), "the current grant is left alone")
			g.Expect(st.FencingToken).To(BeEquivalentTo(1))
			g.Expect(w.lease(g, "invoices").Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, "1"))
		}).WithTimeout(briefly).WithPolling(poll).Should(Succeed())

		const onlyUp = "spec.minFencingToken may only increase"
		expectDenied(update(w.editor, fl, func(fl *fencingv1.FencedLease) { fl.Spec.MinFencingToken = 50 }), onlyUp)
		expectDenied(update(w.root, fl, func(fl *fencingv1.FencedLease) { fl.Spec.MinFencingToken = 0 }), onlyUp)

		By("the next grant is above the floor")
		w.createPod("b", "invoices")
		w.finish("a")
		w.expectHolder("invoices", "b", 101)

		By("with nobody holding, the floor applies at once: the tombstone keeps it")
		w.finish("b")
		Expect(update(w.editor, fl, func(fl *fencingv1.FencedLease) { fl.Spec.MinFencingToken = 500 })).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(w.fl(g, "invoices").Status.FencingToken).To(BeEquivalentTo(500))
			g.Expect(w.lease(g, "invoices").Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, "500"))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})

	It("keeps a grant's duration when the spec changes mid-grant; the new one applies from the next grant", func() {
		w.createFL("invoices", 9)
		a := w.createPod("a", "invoices")
		w.expectHolder("invoices", "a", 1)
		w.createPod("b", "invoices")

		By("the holder renewing every 2s, well within its 9s lease")
		holder := asPod(w.ns, "a", a.UID)
		stop := make(chan struct{})
		renewed := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(renewed)
			for {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Second):
					l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "invoices"}}
					Expect(update(holder, l, func(l *coordinationv1.Lease) { l.Spec.RenewTime = ptr.To(metav1.NowMicro()) })).To(Succeed())
				}
			}
		}()
		DeferCleanup(func() { close(stop); <-renewed })

		Expect(update(w.editor, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "invoices"}},
			func(fl *fencingv1.FencedLease) { fl.Spec.LeaseDurationSeconds = 1 })).To(Succeed())
		Consistently(func(g Gomega) {
			fl := w.fl(g, "invoices")
			g.Expect(fl.Status.Holder).NotTo(BeNil())
			g.Expect(fl.Status.Holder.PodName).To(Equal("a"), "revoked under the new 1s duration")
			g.Expect(fl.Status.Holder.LeaseDurationSeconds).To(BeEquivalentTo(9))
			g.Expect(w.lease(g, "invoices").Spec.LeaseDurationSeconds).To(HaveValue(BeEquivalentTo(9)))
		}).WithTimeout(5 * time.Second).WithPolling(poll).Should(Succeed())

		By("the holder releasing: the next grant gets the new 1s")
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "invoices"}}
		Expect(update(holder, l, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = nil })).To(Succeed())
		fl := w.expectHolder("invoices", "b", 2)
		Expect(fl.Status.Holder.LeaseDurationSeconds).To(BeEquivalentTo(1))
		Expect(w.lease(Default, "invoices").Spec.LeaseDurationSeconds).To(HaveValue(BeEquivalentTo(1)))
	})
})
