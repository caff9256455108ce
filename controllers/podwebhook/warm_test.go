package podwebhook_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	return env
}

// Admission decides nothing from a spec that can change after it (issue 59, item 2).
var _ = Describe("Pod admission reads no FencedLease", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })
	candidate := func(name, lease string) *corev1.Pod {
		return pod(ns, name, map[string]string{fencingv1.LeaseLabel: lease}, nil)
	}

	It("admits a Warm FencedLease's candidate as any other: gated, with every variable; the operator lets it run", func() {
		Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{Standby: fencingv1.StandbyWarm}})).To(Succeed())
		p := candidate("p", "invoices")
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Expect(p.Spec.SchedulingGates).To(ConsistOf(corev1.PodSchedulingGate{Name: fencingv1.SchedulingGate}))
		Expect(p.Annotations).To(Equal(map[string]string{fencingv1.StateAnnotation: "Waiting"}))
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			env := envOf(c)
			Expect(env).To(HaveKey(fencingv1.EnvToken), c.Name)
			Expect(env[fencingv1.EnvLeaseName].Value).To(Equal("invoices"))
			Expect(env[fencingv1.EnvHolderUID].ValueFrom.FieldRef.FieldPath).To(Equal("metadata.uid"))
			Expect(env[fencingv1.EnvSlot].ValueFrom.FieldRef.FieldPath).To(Equal("metadata.annotations['fencing.fencedlease.io/slot']"))
		}
	})

	It("admits a pod naming a FencedLease that does not exist: it waits, gated", func() {
		p := candidate("early", "payroll")
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Expect(p.Spec.SchedulingGates).To(ConsistOf(corev1.PodSchedulingGate{Name: fencingv1.SchedulingGate}))
		Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, "Waiting"))
	})

	It("refuses a pod that brings the holder label", func() {
		p := pod(ns, "p", map[string]string{fencingv1.LeaseLabel: "invoices", fencingv1.HolderLabel: "true"}, nil)
		Expect(k8s.Create(ctx, p)).To(MatchError(ContainSubstring("pods may not be created with the label fencing.fencedlease.io/holder")))
	})

	It("refuses a bad spec.standby with a clear message (the schema)", func() {
		err := k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{Standby: "Hot"}})
		Expect(err).To(MatchError(ContainSubstring(`spec.standby: Unsupported value: "Hot": supported values: "Cold", "Warm"`)))
	})
})
