package workloads

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{fencingv1.LeaseLabel: "invoices"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "work", Image: "example.invalid/work"}}},
	}
}

func get(g Gomega, ns, name string) *corev1.Pod {
	p := &corev1.Pod{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
	return p
}

func condition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

var _ = Describe("Scheduling (issue 8, section 3)", func() {
	It("keeps a waiting pod SchedulingGated under the real scheduler until it is granted, then binds it and it runs", func() {
		ns := newNamespace()
		Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 6, StartupDeadlineSeconds: 6}})).To(Succeed())
		Expect(k8s.Create(ctx, pod(ns, "a"))).To(Succeed())

		By("a: granted, bound to a kwok node by the scheduler, running")
		Eventually(func(g Gomega) {
			a := get(g, ns, "a")
			g.Expect(a.Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, "1"))
			g.Expect(cl.Nodes).To(ContainElement(a.Spec.NodeName))
			g.Expect(a.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		By("b: waiting while a holds; the scheduler reports it SchedulingGated and does not bind it")
		Expect(k8s.Create(ctx, pod(ns, "b"))).To(Succeed())
		Eventually(func(g Gomega) {
			c := condition(get(g, ns, "b"), corev1.PodScheduled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(corev1.PodReasonSchedulingGated))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) {
			b := get(g, ns, "b")
			g.Expect(b.Spec.NodeName).To(BeEmpty())
			g.Expect(b.Status.Phase).To(Equal(corev1.PodPending))
		}).WithTimeout(2 * time.Second).WithPolling(poll).Should(Succeed())

		By("a never renews (nothing runs its agent): revoked, deleted, and gone for real; b granted token 2, bound, running")
		Eventually(func(g Gomega) {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &corev1.Pod{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a still exists: %v", err)
			b := get(g, ns, "b")
			g.Expect(b.Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, "2"))
			g.Expect(cl.Nodes).To(ContainElement(b.Spec.NodeName))
			g.Expect(b.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})
})
