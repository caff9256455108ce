package podwebhook_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

func pod(ns, name string, labels, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "migrate", Image: "example.invalid/migrate"}},
			Containers: []corev1.Container{
				{Name: "work", Image: "example.invalid/work", Env: []corev1.EnvVar{{Name: "MODE", Value: "batch"}}},
				{Name: "log", Image: "example.invalid/log"},
			},
		},
	}
}

var _ = Describe("Pod admission", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"}})).To(Succeed())
	})
	candidate := func(name string, annotations map[string]string) *corev1.Pod {
		return pod(ns, name, map[string]string{fencingv1.LeaseLabel: "invoices"}, annotations)
	}

	It("gates a labeled pod and injects state, env and the fencing volume", func() {
		p := candidate("p", nil)
		Expect(k8s.Create(ctx, p)).To(Succeed())

		Expect(p.Spec.SchedulingGates).To(ConsistOf(corev1.PodSchedulingGate{Name: fencingv1.SchedulingGate}))
		Expect(p.Annotations).To(Equal(map[string]string{fencingv1.StateAnnotation: "Waiting"}), "no standby: the operator decides it")
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			env := map[string]corev1.EnvVar{}
			for _, e := range c.Env {
				env[e.Name] = e
			}
			Expect(env).To(HaveKey("FENCING_TOKEN"), c.Name)
			Expect(env["FENCING_TOKEN"].ValueFrom.FieldRef.FieldPath).To(Equal("metadata.annotations['fencing.fencedlease.io/token']"))
			Expect(env["FENCING_LEASE_NAME"].Value).To(Equal("invoices"))
			Expect(env["FENCING_LEASE_NAMESPACE"].ValueFrom.FieldRef.FieldPath).To(Equal("metadata.namespace"))
			Expect(env["FENCING_HOLDER_IDENTITY"].ValueFrom.FieldRef.FieldPath).To(Equal("metadata.name"))
			Expect(c.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "fencing", MountPath: "/etc/fencing", ReadOnly: true}), c.Name)
		}
		Expect(p.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "MODE", Value: "batch"}))
		Expect(p.Spec.Volumes).To(ContainElement(HaveField("Name", "fencing")))
		var files []string
		for _, v := range p.Spec.Volumes {
			if v.Name == "fencing" {
				for _, f := range v.DownwardAPI.Items {
					files = append(files, f.Path+"="+f.FieldRef.FieldPath)
				}
			}
		}
		Expect(files).To(ConsistOf(
			"token=metadata.annotations['fencing.fencedlease.io/token']",
			"state=metadata.annotations['fencing.fencedlease.io/state']",
			"slot=metadata.annotations['fencing.fencedlease.io/slot']"))
		Expect(p.Spec.InitContainers).To(HaveLen(1), "no agent unless asked for")
	})

	It("adds the renewal agent as a native sidecar when the pod asks for it", func() {
		p := candidate("p", map[string]string{fencingv1.AgentAnnotation: "true"})
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Expect(p.Spec.InitContainers).To(HaveLen(2))
		agent := p.Spec.InitContainers[0]
		Expect(agent.Name).To(Equal("fencing-agent"))
		Expect(agent.Image).To(Equal(agentImage))
		Expect(agent.Args).To(Equal([]string{"agent"}))
		Expect(agent.RestartPolicy).To(HaveValue(Equal(corev1.ContainerRestartPolicyAlways)))
		Expect(agent.Env).To(ContainElement(HaveField("Name", "FENCING_TOKEN")))
		Expect(agent.StartupProbe).NotTo(BeNil(), "the workload must wait for the agent's first renewal")
		Expect(agent.StartupProbe.Exec.Command).To(Equal([]string{"/fencedlease-agent", "agent", "--probe"}))
	})

	It("admits the agent where the restricted Pod Security profile is enforced, under a ResourceQuota", func() {
		Expect(testenv.Restrict(ctx, k8s, ns)).To(Succeed())
		p := testenv.RestrictedAgentPod(ns, "compliant", "invoices")
		// The quota and the namespace label take effect asynchronously in the API server.
		Eventually(func() error { return k8s.Create(ctx, p.DeepCopy()) }).WithTimeout(10 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

		By("without the agent's own requests and seccomp profile, the same pod is refused")
		bare := p.DeepCopy()
		bare.Name, bare.Annotations = "no-agent-fields", nil
		bare.Spec.InitContainers = []corev1.Container{{Name: "sidecar", Image: "example.invalid/s", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}}
		err := k8s.Create(ctx, bare)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a sidecar without seccomp and requests must be refused here, or the spec proves nothing: %v", err)
	})

	It("never sees an unlabeled pod, which stays exactly as sent", func() {
		before := calls.Load()
		sent := pod(ns, "plain", map[string]string{"app": "web"}, map[string]string{"note": "x"})
		p := sent.DeepCopy()
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Expect(calls.Load()).To(Equal(before), "the objectSelector must keep unlabeled pods away from the webhook")
		Expect(p.Annotations).To(Equal(sent.Annotations))
		Expect(p.Labels).To(Equal(sent.Labels))
		Expect(p.Spec.SchedulingGates).To(BeEmpty())
		Expect(p.Spec.Volumes).To(BeEmpty())
		for i, c := range p.Spec.Containers {
			Expect(c.Env).To(Equal(sent.Spec.Containers[i].Env))
			Expect(c.VolumeMounts).To(BeEmpty())
		}
	})

	It("leaves kube-system alone", func() {
		before := calls.Load()
		p := pod("kube-system", "sys", map[string]string{fencingv1.LeaseLabel: "invoices"}, nil)
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Expect(calls.Load()).To(Equal(before))
		Expect(p.Spec.SchedulingGates).To(BeEmpty())
	})

	DescribeTable("refuses, saying why",
		func(edit func(*corev1.Pod), message string) {
			p := candidate("bad", nil)
			edit(p)
			err := k8s.Create(ctx, p)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("a pod bringing its own token", func(p *corev1.Pod) { p.Annotations = map[string]string{fencingv1.TokenAnnotation: "1000"} },
			"pods may not set the annotation fencing.fencedlease.io/token: only the operator grants tokens"),
		Entry("a pod bringing its own state", func(p *corev1.Pod) { p.Annotations = map[string]string{fencingv1.StateAnnotation: "Holding"} },
			`pods may not set the annotation fencing.fencedlease.io/state to "Holding": only the operator moves a pod past Waiting`),
		Entry("a pod bringing its own standby", func(p *corev1.Pod) { p.Annotations = map[string]string{fencingv1.StandbyAnnotation: "Warm"} },
			"pods may not set the annotation fencing.fencedlease.io/standby: the operator sets it from the FencedLease's spec.standby"),
		Entry("a pod bringing its own slot", func(p *corev1.Pod) { p.Annotations = map[string]string{fencingv1.SlotAnnotation: "2"} },
			"pods may not set the annotation fencing.fencedlease.io/slot: only the operator assigns slots"),
		Entry("a container with its own FENCING_TOKEN", func(p *corev1.Pod) {
			p.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "FENCING_TOKEN", Value: "7"}}
		}, `container "log" sets FENCING_TOKEN: the operator injects the FENCING_* variables; remove them from the pod`),
		Entry("a container named like the agent", func(p *corev1.Pod) { p.Spec.Containers[1].Name = fencingv1.AgentContainerName },
			"the container name fencing-agent is the renewal agent's"),
		Entry("a pod already bound to a node, which no gate can hold back", func(p *corev1.Pod) { p.Spec.NodeName = "node-1" },
			"spec.nodeName is set (node-1): a pod bound to a node when it is created cannot be held back by a scheduling gate, so it could start before it is granted; remove spec.nodeName"),
		Entry("an empty label", func(p *corev1.Pod) { p.Labels[fencingv1.LeaseLabel] = "" },
			"the label fencing.fencedlease.io/lease must name a FencedLease in this namespace"),
	)

	It("changes nothing more when it sees its own work again", func() {
		p := candidate("twice", nil)
		Expect(k8s.Create(ctx, p)).To(Succeed())
		again := p.DeepCopy()
		again.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "twice-again", Labels: p.Labels, Annotations: p.Annotations}
		sent := again.DeepCopy()
		Expect(k8s.Create(ctx, again)).To(Succeed())
		Expect(again.Spec.SchedulingGates).To(Equal(sent.Spec.SchedulingGates))
		Expect(again.Spec.Volumes).To(Equal(sent.Spec.Volumes))
		Expect(again.Spec.Containers).To(HaveLen(len(sent.Spec.Containers)))
		for i := range again.Spec.Containers {
			Expect(again.Spec.Containers[i].Env).To(Equal(sent.Spec.Containers[i].Env))
			Expect(again.Spec.Containers[i].VolumeMounts).To(Equal(sent.Spec.Containers[i].VolumeMounts))
		}
	})
})
