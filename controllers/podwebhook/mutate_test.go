package podwebhook

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

func candidate() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{fencingv1.LeaseLabel: "invoices"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "migrate", Image: "x"}},
			Containers:     []corev1.Container{{Name: "a", Image: "x"}, {Name: "b", Image: "x"}},
		},
	}
}

func TestAdmitIsIdempotent(t *testing.T) {
	p := candidate()
	p.Annotations = map[string]string{fencingv1.AgentAnnotation: "true"}
	if err := Admit(p, "agent:v1"); err != nil {
		t.Fatal(err)
	}
	once := p.DeepCopy()
	if err := Admit(p, "agent:v1"); err != nil {
		t.Fatalf("second application refused: %v", err)
	}
	if !equality.Semantic.DeepEqual(once, p) {
		t.Fatalf("second application changed the pod")
	}
	if n := len(p.Spec.InitContainers); n != 2 || p.Spec.InitContainers[0].Name != fencingv1.AgentContainerName {
		t.Fatalf("want the agent first among %d init containers: %+v", n, p.Spec.InitContainers)
	}
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		if len(c.Env) != 6 || len(c.VolumeMounts) != 2 {
			t.Fatalf("container %s: env %v mounts %v", c.Name, c.Env, c.VolumeMounts)
		}
		// The agent's state folder: the agent writes it, the workload reads it.
		run := c.VolumeMounts[1]
		if run.Name != fencingv1.AgentVolumeName || run.MountPath != fencingv1.AgentMountPath || run.ReadOnly != (c.Name != fencingv1.AgentContainerName) {
			t.Fatalf("container %s: state folder mount %+v", c.Name, run)
		}
	}
	if len(p.Spec.Volumes) != 2 || p.Spec.Volumes[1].EmptyDir == nil || p.Spec.Volumes[1].EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Fatalf("volumes %+v", p.Spec.Volumes)
	}
}

// Without the agent, no state folder: nothing writes it.
func TestAdmitWithoutAgentAddsNoStateFolder(t *testing.T) {
	p := candidate()
	if err := Admit(p, "agent:v1"); err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.Volumes) != 1 || len(p.Spec.Containers[0].VolumeMounts) != 1 {
		t.Fatalf("volumes %+v, mounts %+v", p.Spec.Volumes, p.Spec.Containers[0].VolumeMounts)
	}
}

func TestAdmitRefusals(t *testing.T) {
	cases := map[string]struct {
		edit func(*corev1.Pod)
		want string
	}{
		"bound to a node": {func(p *corev1.Pod) { p.Spec.NodeName = "node-1" },
			"spec.nodeName is set (node-1): a pod bound to a node when it is created cannot be held back by a scheduling gate"},
		"own token": {func(p *corev1.Pod) { p.Annotations = map[string]string{fencingv1.TokenAnnotation: "99"} },
			"pods may not set the annotation fencing.fencedlease.io/token: only the operator grants tokens"},
		"own state": {func(p *corev1.Pod) { p.Annotations = map[string]string{fencingv1.StateAnnotation: "Holding"} },
			`pods may not set the annotation fencing.fencedlease.io/state to "Holding": only the operator moves a pod past Waiting`},
		"env clash": {func(p *corev1.Pod) { p.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "FENCING_TOKEN", Value: "7"}} },
			`container "b" sets FENCING_TOKEN: the operator injects the FENCING_* variables; remove them from the pod`},
		"volume clash": {func(p *corev1.Pod) { p.Spec.Volumes = []corev1.Volume{{Name: "fencing"}} },
			`the pod already has a volume named "fencing"; rename it: the operator uses that name`},
		"mount clash": {func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "other", MountPath: "/etc/fencing"}}
		}, `container "a" already mounts /etc/fencing or volume "fencing"`},
		"own standby": {func(p *corev1.Pod) { p.Annotations = map[string]string{fencingv1.StandbyAnnotation: "Warm"} },
			"pods may not set the annotation fencing.fencedlease.io/standby"},
		"own slot": {func(p *corev1.Pod) { p.Annotations = map[string]string{fencingv1.SlotAnnotation: "1"} },
			"pods may not set the annotation fencing.fencedlease.io/slot"},
		"empty label": {func(p *corev1.Pod) { p.Labels[fencingv1.LeaseLabel] = "" },
			"the label fencing.fencedlease.io/lease must name a FencedLease in this namespace: it is empty"},
		"a container named like the agent": {func(p *corev1.Pod) { p.Spec.Containers[1].Name = fencingv1.AgentContainerName },
			"the container name fencing-agent is the renewal agent's"},
		"an init container named like the agent, no agent asked for": {func(p *corev1.Pod) { p.Spec.InitContainers[0].Name = fencingv1.AgentContainerName },
			"the container name fencing-agent is the renewal agent's"},
		"the agent's state folder without the agent": {func(p *corev1.Pod) {
			p.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/run/fencing"}}
		}, `container "b" mounts /run/fencing or volume "fencing-run"`},
		"agent state folder clash": {func(p *corev1.Pod) {
			p.Annotations = map[string]string{fencingv1.AgentAnnotation: "true"}
			p.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/run/fencing"}}
		}, `container "b" already mounts /run/fencing or volume "fencing-run"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := candidate()
			tc.edit(p)
			err := Admit(p, "agent:v1")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestAdmitAcceptsWhatItWouldWriteItself(t *testing.T) {
	p := candidate()
	p.Annotations = map[string]string{fencingv1.StateAnnotation: "Waiting"}
	p.Spec.Containers[0].Env = fencingEnv("invoices")[:1]
	if err := Admit(p, "agent:v1"); err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.Containers[0].Env) != 6 {
		t.Fatalf("env = %v", p.Spec.Containers[0].Env)
	}
}
