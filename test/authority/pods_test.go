package authority

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

const (
	labelFixed  = "the label fencing.fencedlease.io/lease is set when a pod is created and never changes"
	annotations = "the annotations fencing.fencedlease.io/token, fencing.fencedlease.io/state and fencing.fencedlease.io/standby are written by the operator alone"
	gateMessage = "only the operator removes the scheduling gate fencing.fencedlease.io/grant"
)

func setAnnotation(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

func removeGate(p *corev1.Pod) { p.Spec.SchedulingGates = nil }

var _ = Describe("Pod updates (issue 7, items 1 and 2)", func() {
	var w *world
	BeforeEach(func() { w = heldAndWaiting() })

	// Each forgery is refused, and the pod stays an ungranted candidate: a stays the holder.
	DescribeTable("refuses a forged grant on a waiting pod",
		func(who string, message string, mutate ...func(*corev1.Pod)) {
			c := map[string]client.Client{"editor": w.editor, "admin": w.admin, "cluster admin": w.root}[who]
			err := update(c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "b"}}, func(p *corev1.Pod) {
				for _, m := range mutate {
					m(p)
				}
			})
			expectDenied(err, message)
			Consistently(func(g Gomega) {
				w.expectWaiting(g, "b")
				g.Expect(w.fl(g, "invoices").Status.Holder.PodName).To(Equal("a"))
			}).WithTimeout(briefly).WithPolling(poll).Should(Succeed())
		},
		Entry("an editor: its own token, and the gate removed", "editor", annotations,
			setAnnotation(fencingv1.TokenAnnotation, "999"), removeGate),
		Entry("an editor: the gate removed only", "editor", gateMessage, removeGate),
		Entry("an editor: state Holding", "editor", annotations, setAnnotation(fencingv1.StateAnnotation, "Holding")),
		Entry("an editor: state Released", "editor", annotations, setAnnotation(fencingv1.StateAnnotation, "Released")),
		Entry("an editor: state Revoked", "editor", annotations, setAnnotation(fencingv1.StateAnnotation, "Revoked")),
		Entry("an admin: token and gate", "admin", annotations, setAnnotation(fencingv1.TokenAnnotation, "999"), removeGate),
		Entry("a cluster admin: token and gate", "cluster admin", annotations, setAnnotation(fencingv1.TokenAnnotation, "999"), removeGate),
		Entry("a cluster admin: the gate removed only", "cluster admin", gateMessage, removeGate),
	)

	It("refuses the same through the pods/status subresource, which may change annotations", func() {
		b := w.pod(Default, "b")
		b.Annotations[fencingv1.TokenAnnotation] = "999"
		expectDenied(w.root.Status().Update(ctx, b), annotations)
		Consistently(func(g Gomega) { w.expectWaiting(g, "b") }).WithTimeout(briefly).WithPolling(poll).Should(Succeed())
	})

	It("refuses labeling a pod after it was created, and moving or removing the label of a candidate or the holder", func() {
		plain := newPod(w.ns, "plain", "")
		Expect(w.editor.Create(ctx, plain)).To(Succeed())
		for _, c := range []client.Client{w.editor, w.admin, w.root} {
			expectDenied(update(c, plain, func(p *corev1.Pod) { p.Labels = map[string]string{fencingv1.LeaseLabel: "invoices"} }), labelFixed)
			expectDenied(update(c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "a"}},
				func(p *corev1.Pod) { delete(p.Labels, fencingv1.LeaseLabel) }), labelFixed)
			expectDenied(update(c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "b"}},
				func(p *corev1.Pod) { p.Labels[fencingv1.LeaseLabel] = "payroll" }), labelFixed)
		}
		Consistently(func(g Gomega) {
			g.Expect(w.pod(g, "plain").Labels).NotTo(HaveKey(fencingv1.LeaseLabel))
			g.Expect(w.fl(g, "invoices").Status.Holder.PodName).To(Equal("a"))
			w.expectWaiting(g, "b")
		}).WithTimeout(briefly).WithPolling(poll).Should(Succeed())
	})

	It("lets every other update through: users' labels, the kubelet's status, a Job's finalizer, the scheduler's binding, deletion", func() {
		for _, name := range []string{"a", "b"} {
			Expect(update(w.editor, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}, func(p *corev1.Pod) {
				p.Labels["team"] = "billing"
				p.Annotations["note"] = "checked"
			})).To(Succeed(), "an editor's own label and annotation on %s", name)
		}

		By("the kubelet reporting the holder running (pods/status)")
		a := w.pod(Default, "a")
		a.Status.Phase = corev1.PodRunning
		a.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		Expect(w.root.Status().Update(ctx, a)).To(Succeed())

		By("the Job controller adding and removing its tracking finalizer")
		bind(w.ns, "edit", rbacv1.Subject{Kind: "ServiceAccount", Name: "job-controller", Namespace: "kube-system"})
		job := asUser("system:serviceaccount:kube-system:job-controller", "system:serviceaccounts")
		b := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "b"}}
		Expect(update(job, b, func(p *corev1.Pod) { p.Finalizers = append(p.Finalizers, "batch.kubernetes.io/job-tracking") })).To(Succeed())
		Expect(update(job, b, func(p *corev1.Pod) { p.Finalizers = nil })).To(Succeed())

		By("the scheduler binding the granted pod to a node")
		Expect(w.root.SubResource("binding").Create(ctx, w.pod(Default, "a"), &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "a"},
			Target:     corev1.ObjectReference{Kind: "Node", Name: "node-1"},
		})).To(Succeed())
		Expect(w.pod(Default, "a").Spec.NodeName).To(Equal("node-1"))

		By("an editor deleting the waiting pod")
		Expect(w.editor.Delete(ctx, w.pod(Default, "b"))).To(Succeed())
		Consistently(func(g Gomega) { g.Expect(w.fl(g, "invoices").Status.Holder.PodName).To(Equal("a")) }).
			WithTimeout(briefly).WithPolling(poll).Should(Succeed())
	})

	// With the policy in place only the operator can unlabel a pod; it plays here the
	// part of a policy that was never installed or was bypassed. (A2)
	It("revokes a holder that lost its label, instead of releasing it while it runs", func() {
		a := w.pod(Default, "a")
		unlabeled := a.DeepCopy()
		delete(unlabeled.Labels, fencingv1.LeaseLabel)
		Expect(operator.Patch(ctx, unlabeled, client.MergeFrom(a))).To(Succeed())
		fl := w.expectHolder("invoices", "b", 2)
		Expect(fl.Status.LastRevocation).NotTo(BeNil())
		Expect(fl.Status.LastRevocation.PodName).To(Equal("a"))
		Expect(fl.Status.LastRevocation.Reason).To(Equal(fencingv1.ReasonLabelRemoved))
		Expect(fl.Status.Revocations).To(BeEquivalentTo(1))
		Eventually(func(g Gomega) {
			p := &corev1.Pod{}
			err := k8s.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "a"}, p)
			if err == nil {
				g.Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodRevoked)))
				g.Expect(p.DeletionTimestamp).NotTo(BeNil(), "DeletePod: the revoked pod is deleted")
			}
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})
})
