package podwebhook_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	return env
}

var _ = Describe("Pod admission in Warm standby (issue 21, item 1)", func() {
	var ns string
	create := func(mode fencingv1.StandbyMode) {
		GinkgoHelper()
		ns = newNamespace()
		Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{Standby: mode}})).To(Succeed())
	}
	candidate := func(name string, annotations map[string]string) *corev1.Pod {
		return pod(ns, name, map[string]string{fencingv1.LeaseLabel: "invoices"}, annotations)
	}

	It("makes a Warm candidate without a gate and without a FENCING_TOKEN that would resolve empty, with the names and the pod's UID", func() {
		create(fencingv1.StandbyWarm)
		p := candidate("p", map[string]string{fencingv1.AgentAnnotation: "true"})
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Expect(p.Spec.SchedulingGates).To(BeEmpty(), "scheduled and started at once")
		Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, "Waiting"))
		Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.StandbyAnnotation, "Warm"))
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			env := envOf(c)
			Expect(env).NotTo(HaveKey(fencingv1.EnvToken), c.Name)
			Expect(env[fencingv1.EnvLeaseName].Value).To(Equal("invoices"))
			Expect(env[fencingv1.EnvHolderIdentity].ValueFrom.FieldRef.FieldPath).To(Equal("metadata.name"))
			Expect(env[fencingv1.EnvHolderUID].ValueFrom.FieldRef.FieldPath).To(Equal("metadata.uid"))
			Expect(c.VolumeMounts).To(ContainElement(HaveField("MountPath", "/etc/fencing")), c.Name)
		}
		Expect(p.Spec.InitContainers[0].Name).To(Equal(fencingv1.AgentContainerName), "the agent still comes where asked")
	})

	It("refuses a container of a Warm candidate that sets FENCING_TOKEN itself", func() {
		create(fencingv1.StandbyWarm)
		p := candidate("p", nil)
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: fencingv1.EnvToken, Value: "7"})
		err := k8s.Create(ctx, p)
		Expect(err).To(MatchError(ContainSubstring(`container "work" sets FENCING_TOKEN: in a Warm FencedLease the token is not known when containers start`)))
	})

	It("reads the mode when a pod is admitted: a change of spec.standby leaves waiting pods as they were admitted", func() {
		create(fencingv1.StandbyCold)
		cold := candidate("cold", nil)
		Expect(k8s.Create(ctx, cold)).To(Succeed())
		fl := &fencingv1.FencedLease{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, fl)).To(Succeed())
		fl.Spec.Standby = fencingv1.StandbyWarm
		Expect(k8s.Update(ctx, fl)).To(Succeed())
		warm := candidate("warm", nil)
		Expect(k8s.Create(ctx, warm)).To(Succeed())
		Expect(warm.Spec.SchedulingGates).To(BeEmpty())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cold), cold)).To(Succeed())
		Expect(cold.Spec.SchedulingGates).To(ConsistOf(corev1.PodSchedulingGate{Name: fencingv1.SchedulingGate}), "still gated: Cold until granted")
		Expect(cold.Annotations).To(HaveKeyWithValue(fencingv1.StandbyAnnotation, "Cold"))
		Expect(envOf(cold.Spec.Containers[0])).To(HaveKey(fencingv1.EnvToken))
	})

	It("ignores a standby annotation a pod brings: the FencedLease decides", func() {
		create(fencingv1.StandbyCold)
		p := candidate("p", map[string]string{fencingv1.StandbyAnnotation: "Warm"})
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.StandbyAnnotation, "Cold"))
		Expect(p.Spec.SchedulingGates).NotTo(BeEmpty())
	})

	It("refuses a pod that brings the holder label", func() {
		create(fencingv1.StandbyWarm)
		p := pod(ns, "p", map[string]string{fencingv1.LeaseLabel: "invoices", fencingv1.HolderLabel: "true"}, nil)
		Expect(k8s.Create(ctx, p)).To(MatchError(ContainSubstring("pods may not carry the label fencing.fencedlease.io/holder")))
	})

	It("refuses a bad spec.standby with a clear message (the schema)", func() {
		ns = newNamespace()
		err := k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{Standby: "Hot"}})
		Expect(err).To(MatchError(ContainSubstring(`spec.standby: Unsupported value: "Hot": supported values: "Cold", "Warm"`)))
	})
})
