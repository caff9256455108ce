package policy

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	webhookconfig "github.com/fencedlease/fencedlease/config/webhook"
	"github.com/fencedlease/fencedlease/controllers/podwebhook"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// candidatePod is a labeled pod as a user writes it: a workload container, a log
// sidecar and an init container, with env and a volume of their own.
func candidatePod(ns, name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{fencingv1.LeaseLabel: "invoices", "app": "billing"},
			Annotations: annotations},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "migrate", Image: "example.invalid/migrate"}},
			Containers: []corev1.Container{
				{Name: "work", Image: "example.invalid/work", Env: []corev1.EnvVar{{Name: "MODE", Value: "batch"}},
					VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}},
				{Name: "log", Image: "example.invalid/log"},
			},
			Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

// expectAdmittedAsTheWebhookWould compares what the API server stored (got) with what
// the webhook's Admit makes of the pod as sent: the labels, annotations, gates and
// volumes, and each container's env and mounts, exactly; the agent's own fields but those
// the API server defaults.
func expectAdmittedAsTheWebhookWould(sent, got *corev1.Pod) {
	GinkgoHelper()
	want := sent.DeepCopy()
	Expect(podwebhook.Admit(want, agentImage)).To(Succeed())
	Expect(got.Labels).To(Equal(want.Labels))
	Expect(got.Annotations).To(Equal(want.Annotations))
	Expect(got.Spec.SchedulingGates).To(Equal(want.Spec.SchedulingGates))
	Expect(got.Spec.Volumes).To(Equal(want.Spec.Volumes))
	compare := func(got, want []corev1.Container) {
		GinkgoHelper()
		Expect(got).To(HaveLen(len(want)))
		for i := range want {
			Expect(got[i].Name).To(Equal(want[i].Name))
			Expect(got[i].Env).To(Equal(want[i].Env), want[i].Name)
			Expect(got[i].VolumeMounts).To(Equal(want[i].VolumeMounts), want[i].Name)
			if want[i].Name != fencingv1.AgentContainerName {
				continue
			}
			agent, wantAgent := got[i].DeepCopy(), want[i].DeepCopy()
			wantAgent.ImagePullPolicy, wantAgent.TerminationMessagePath, wantAgent.TerminationMessagePolicy =
				agent.ImagePullPolicy, agent.TerminationMessagePath, agent.TerminationMessagePolicy
			wantAgent.StartupProbe.SuccessThreshold = agent.StartupProbe.SuccessThreshold
			Expect(agent).To(Equal(wantAgent))
		}
	}
	compare(got.Spec.InitContainers, want.Spec.InitContainers)
	compare(got.Spec.Containers, want.Spec.Containers)
	// Where both are installed the webhook sees the policy's pod: it must take it as its
	// own work, refusing and changing nothing.
	again := got.DeepCopy()
	Expect(podwebhook.Admit(again, agentImage)).To(Succeed(), "the webhook after the policy")
	Expect(again).To(Equal(got), "the webhook after the policy changed the pod")
}

var _ = Describe("Candidate admission by the API server alone (issue 59, item 1)", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	DescribeTable("admits a labeled pod exactly as the pod webhook does",
		func(edit func(*corev1.Pod)) {
			sent := candidatePod(ns, "p", nil)
			edit(sent)
			got := sent.DeepCopy()
			Expect(admin.Create(ctx, got)).To(Succeed())
			expectAdmittedAsTheWebhookWould(sent, got)
		},
		Entry("a pod of three containers", func(*corev1.Pod) {}),
		Entry("a pod with one container and nothing else", func(p *corev1.Pod) {
			p.Spec.InitContainers, p.Spec.Volumes = nil, nil
			p.Spec.Containers = []corev1.Container{{Name: "work", Image: "example.invalid/work"}}
		}),
		Entry("a pod asking for the agent: first among its init containers", func(p *corev1.Pod) {
			p.Annotations = map[string]string{fencingv1.AgentAnnotation: "true"}
		}),
		Entry("a pod asking for the agent, without init containers", func(p *corev1.Pod) {
			p.Annotations = map[string]string{fencingv1.AgentAnnotation: "true"}
			p.Spec.InitContainers = nil
		}),
		Entry("a pod bringing state Waiting, a variable and the mount as admission writes them", func(p *corev1.Pod) {
			p.Annotations = map[string]string{fencingv1.StateAnnotation: "Waiting"}
			p.Spec.Containers[1].Env = []corev1.EnvVar{{Name: fencingv1.EnvLeaseName, Value: "invoices"}}
			p.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{{Name: "fencing", MountPath: "/etc/fencing", ReadOnly: true}}
		}),
		Entry("a pod with a scheduling gate of its own", func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
		}),
	)

	It("admits a pod naming a FencedLease that does not exist, gated, to wait for it", func() {
		p := candidatePod(ns, "early", nil)
		p.Labels[fencingv1.LeaseLabel] = "payroll"
		Expect(admin.Create(ctx, p)).To(Succeed())
		Expect(p.Spec.SchedulingGates).To(ConsistOf(corev1.PodSchedulingGate{Name: fencingv1.SchedulingGate}))
	})

	It("leaves an unlabeled pod exactly as sent", func() {
		sent := candidatePod(ns, "plain", map[string]string{"note": "x"})
		delete(sent.Labels, fencingv1.LeaseLabel)
		got := sent.DeepCopy()
		Expect(admin.Create(ctx, got)).To(Succeed())
		Expect(got.Annotations).To(Equal(sent.Annotations))
		Expect(got.Spec.SchedulingGates).To(BeEmpty())
		Expect(got.Spec.Volumes).To(HaveLen(1))
		Expect(got.Spec.Containers[0].Env).To(Equal(sent.Spec.Containers[0].Env))
	})

	It("admits the agent where the restricted Pod Security profile is enforced, under a ResourceQuota", func() {
		Expect(testenv.Restrict(ctx, admin, ns)).To(Succeed())
		p := testenv.RestrictedAgentPod(ns, "compliant", "invoices")
		// The quota and the namespace label take effect asynchronously in the API server.
		Eventually(func() error { return admin.Create(ctx, p.DeepCopy()) }).WithTimeout(10 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	})

	DescribeTable("refuses, naming what it refused",
		func(edit func(*corev1.Pod), message string) {
			p := candidatePod(ns, "bad", nil)
			edit(p)
			sent := p.DeepCopy()
			// Not as admin, who plays the operator here: the holder label's policy exempts it.
			expectDenied(asUser("someone", "system:masters").Create(ctx, p), message)
			By("the pod webhook refuses it too")
			Expect(podwebhook.Admit(sent, agentImage)).To(HaveOccurred())
		},
		Entry("an empty label", func(p *corev1.Pod) { p.Labels[fencingv1.LeaseLabel] = "" },
			"the label fencing.fencedlease.io/lease must name a FencedLease in this namespace: it is empty"),
		Entry("a pod bound to a node, which no gate can hold back", func(p *corev1.Pod) { p.Spec.NodeName = "node-1" },
			"spec.nodeName"),
		Entry("its own token", func(p *corev1.Pod) { p.Annotations = map[string]string{fencingv1.TokenAnnotation: "1000"} },
			"pods may not set the annotation fencing.fencedlease.io/token: only the operator grants tokens"),
		Entry("its own state", func(p *corev1.Pod) { p.Annotations = map[string]string{fencingv1.StateAnnotation: "Holding"} },
			`pods may not set the annotation fencing.fencedlease.io/state to "Holding": only the operator moves a pod past Waiting`),
		Entry("its own standby", func(p *corev1.Pod) { p.Annotations = map[string]string{fencingv1.StandbyAnnotation: "Warm"} },
			"pods may not set the annotation fencing.fencedlease.io/standby: the operator sets it from the FencedLease's spec.standby"),
		Entry("its own slot", func(p *corev1.Pod) { p.Annotations = map[string]string{fencingv1.SlotAnnotation: "1"} },
			"pods may not set the annotation fencing.fencedlease.io/slot: only the operator assigns slots"),
		Entry("the slot label", func(p *corev1.Pod) { p.Labels[fencingv1.SlotLabel] = "1" },
			"pods may not carry the label fencing.fencedlease.io/slot"),
		Entry("the holder label", func(p *corev1.Pod) { p.Labels[fencingv1.HolderLabel] = "true" },
			"pods may not be created with the label fencing.fencedlease.io/holder"),
		Entry("a FENCING_TOKEN of its own", func(p *corev1.Pod) {
			p.Spec.Containers[1].Env = []corev1.EnvVar{{Name: fencingv1.EnvToken, Value: "7"}}
		}, "container log sets FENCING_TOKEN: the operator injects the FENCING_* variables; remove them from the pod"),
		Entry("a FENCING_LEASE_NAME naming another FencedLease", func(p *corev1.Pod) {
			p.Spec.InitContainers[0].Env = []corev1.EnvVar{{Name: fencingv1.EnvLeaseName, Value: "payroll"}}
		}, "container migrate sets FENCING_LEASE_NAME"),
		Entry("a FENCING_HOLDER_IDENTITY from another field", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: fencingv1.EnvHolderIdentity,
				ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}})
		}, "container work sets FENCING_HOLDER_IDENTITY"),
		Entry("a volume of its own named fencing", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "fencing", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}, "the pod has a volume named fencing or fencing-run of its own"),
		Entry("another volume mounted at /etc/fencing", func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/etc/fencing"}}
		}, "container work mounts scratch at /etc/fencing: the operator mounts the fencing files at /etc/fencing"),
		Entry("the fencing volume mounted writable", func(p *corev1.Pod) {
			p.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{{Name: "fencing", MountPath: "/etc/fencing"}}
		}, "container log mounts fencing at /etc/fencing"),
		Entry("a mount at the agent's folder, without the agent", func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/run/fencing"}}
		}, "container work mounts scratch at /run/fencing"),
		Entry("a container named like the agent", func(p *corev1.Pod) { p.Spec.Containers[1].Name = fencingv1.AgentContainerName },
			"the container name fencing-agent is the renewal agent's"),
		Entry("an init container named like the agent, the agent not asked for", func(p *corev1.Pod) {
			p.Spec.InitContainers[0].Name = fencingv1.AgentContainerName
		}, "the container name fencing-agent is the renewal agent's"),
	)
})

// Without the mutating policy nothing admits a candidate: the pod must be refused, never
// stored ungated. Serial: it unbinds the mutating policy for the whole API server.
var _ = Describe("A labeled pod no admission mutated", Serial, func() {
	It("is refused, saying which admission is missing", func() {
		ns := newNamespace()
		binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: "fencedlease-candidate"}, binding)).To(Succeed())
		Expect(admin.Delete(ctx, binding)).To(Succeed())
		DeferCleanup(func() {
			restored := binding.DeepCopy()
			restored.ObjectMeta = metav1.ObjectMeta{Name: binding.Name}
			Expect(admin.Create(ctx, restored)).To(Succeed())
			Eventually(func(g Gomega) {
				p := candidatePod(ns, "", nil)
				p.GenerateName = "after-"
				g.Expect(admin.Create(ctx, p)).To(Succeed())
			}).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		})
		Eventually(func(g Gomega) {
			p := candidatePod(ns, "", nil)
			p.GenerateName = "unmutated-"
			err := admin.Create(ctx, p)
			g.Expect(err).To(MatchError(ContainSubstring("the pod carries the label fencing.fencedlease.io/lease but was not admitted as a candidate")))
			g.Expect(err).To(MatchError(ContainSubstring("the MutatingAdmissionPolicy fencedlease-candidate (or, before Kubernetes 1.36, the pod webhook) must be installed")))
		}).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	})
})

// The pod webhook as shipped, with no operator behind it: it fails open, and the
// mutating policy admits the pod (issue 59: an operator outage never blocks a pod).
// Serial: the webhook configuration is the whole API server's.
var _ = Describe("Candidates while the operator cannot answer its pod webhook", Serial, func() {
	It("are admitted by the API server alone, gated", func() {
		ns := newNamespace()
		hook, err := webhookconfig.Configuration()
		Expect(err).NotTo(HaveOccurred())
		hook.Name = "fencedlease-unanswered"
		By("first failing closed, as it did before: the API server calls it, and cannot reach it")
		shipped := *hook.Webhooks[0].FailurePolicy
		Expect(shipped).To(Equal(admissionregistrationv1.Ignore))
		hook.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Fail)
		Expect(admin.Create(ctx, hook)).To(Succeed())
		DeferCleanup(func() { Expect(admin.Delete(ctx, hook)).To(Succeed()) })
		Eventually(func() error {
			p := candidatePod(ns, "", nil)
			p.GenerateName = "closed-"
			return admin.Create(ctx, p)
		}).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(MatchError(ContainSubstring("failed calling webhook")))
		By("then as shipped, failing open")
		hook.Webhooks[0].FailurePolicy = ptr.To(shipped)
		Expect(admin.Update(ctx, hook)).To(Succeed())
		Eventually(func() error {
			p := candidatePod(ns, "", nil)
			p.GenerateName = "open-"
			return admin.Create(ctx, p)
		}).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		for i := range 3 {
			sent := candidatePod(ns, fmt.Sprintf("p%d", i), nil)
			got := sent.DeepCopy()
			start := time.Now()
			Expect(admin.Create(ctx, got)).To(Succeed())
			GinkgoWriter.Printf("created in %v with the webhook unanswered\n", time.Since(start))
			expectAdmittedAsTheWebhookWould(sent, got)
		}
	})
})
