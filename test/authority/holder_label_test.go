package authority

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

const (
	holderLabelFixed   = "the label fencing.fencedlease.io/holder is written by the operator alone"
	holderLabelCreated = "pods may not be created with the label fencing.fencedlease.io/holder"
)

var _ = Describe("The holder label (issue 21, item 3)", func() {
	var w *world
	BeforeEach(func() { w = heldAndWaiting() })

	It("is on the holder only, put there by the operator in the grant's write", func() {
		Eventually(func(g Gomega) {
			g.Expect(w.pod(g, "a").Labels).To(HaveKeyWithValue(fencingv1.HolderLabel, "true"))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Expect(w.pod(Default, "b").Labels).NotTo(HaveKey(fencingv1.HolderLabel))
	})

	It("cannot be added, changed or removed by anyone else, on a candidate, the holder, or any other pod", func() {
		plain := newPod(w.ns, "plain", "")
		Expect(w.editor.Create(ctx, plain)).To(Succeed())
		for _, c := range []client.Client{w.editor, w.admin, w.root} {
			expectDenied(update(c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "b"}},
				func(p *corev1.Pod) { p.Labels[fencingv1.HolderLabel] = "true" }), holderLabelFixed)
			expectDenied(update(c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "a"}},
				func(p *corev1.Pod) { delete(p.Labels, fencingv1.HolderLabel) }), holderLabelFixed)
			expectDenied(update(c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "a"}},
				func(p *corev1.Pod) { p.Labels[fencingv1.HolderLabel] = "false" }), holderLabelFixed)
			expectDenied(update(c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "plain"}},
				func(p *corev1.Pod) { p.Labels = map[string]string{fencingv1.HolderLabel: "true"} }), holderLabelFixed)
		}
		By("nor through pods/status")
		a := w.pod(Default, "a")
		delete(a.Labels, fencingv1.HolderLabel)
		expectDenied(w.root.Status().Update(ctx, a), holderLabelFixed)

		By("a pod created with it is refused, labeled for a FencedLease or not")
		forged := newPod(w.ns, "forged", "")
		forged.Labels = map[string]string{fencingv1.HolderLabel: "true", "app": "scheduler"}
		expectDenied(w.editor.Create(ctx, forged), holderLabelCreated)
		Consistently(func(g Gomega) {
			g.Expect(w.pod(g, "a").Labels).To(HaveKeyWithValue(fencingv1.HolderLabel, "true"))
			g.Expect(w.pod(g, "b").Labels).NotTo(HaveKey(fencingv1.HolderLabel))
		}).WithTimeout(briefly).WithPolling(poll).Should(Succeed())
	})

	It("lets the holder be evicted (a drain) and its other labels change", func() {
		Eventually(func(g Gomega) { g.Expect(w.pod(g, "a").Labels).To(HaveKey(fencingv1.HolderLabel)) }).
			WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Expect(update(w.editor, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "a"}},
			func(p *corev1.Pod) { p.Labels["team"] = "billing" })).To(Succeed())
		Expect(w.root.SubResource("eviction").Create(ctx, w.pod(Default, "a"), &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "a"}})).To(Succeed())
		w.expectHolder("invoices", "b", 2)
		Eventually(func(g Gomega) { g.Expect(w.pod(g, "b").Labels).To(HaveKeyWithValue(fencingv1.HolderLabel, "true")) }).
			WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})
})
