// Package podwebhook is the mutating admission webhook for candidate pods, for clusters
// older than Kubernetes 1.36 where the MutatingAdmissionPolicy fencedlease-candidate
// cannot run: it gates them, injects the fencing env and volume (and on request the
// renewal agent), and refuses pods that try to bring their own authority, exactly as the
// policies do.
package podwebhook

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// Admit makes pod a candidate of the FencedLease its label names, as the
// MutatingAdmissionPolicy fencedlease-candidate does inside the API server: the
// scheduling gate, state Waiting, the FENCING_* env and the fencing volume in every
// container, and the agent as a native sidecar when the pod asks for it. It reads no
// FencedLease: every candidate is admitted alike, and the operator lets a Warm
// FencedLease's candidates run. It is idempotent (a pod it already admitted comes out
// unchanged), and refuses, with the field named, what the ValidatingAdmissionPolicy
// fencedlease-candidate-check refuses: a pod bringing a grant, a standby or a slot of
// its own, or something of its own under the names it injects. agentImage is the image of
// the renewal sidecar.
func Admit(pod *corev1.Pod, agentImage string) error {
	lease := pod.Labels[fencingv1.LeaseLabel]
	if lease == "" {
		return fmt.Errorf("the label %s must name a FencedLease in this namespace: it is empty", fencingv1.LeaseLabel)
	}
	if err := refuseAuthority(pod); err != nil {
		return err
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[fencingv1.StateAnnotation] = string(fencingv1.PodWaiting)
	if !hasGate(pod) {
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: fencingv1.SchedulingGate})
	}
	if err := ensureVolume(pod, downwardVolume()); err != nil {
		return err
	}
	agent := pod.Annotations[fencingv1.AgentAnnotation] == "true"
	if findContainer(pod.Spec.Containers, fencingv1.AgentContainerName) >= 0 ||
		!agent && findContainer(pod.Spec.InitContainers, fencingv1.AgentContainerName) >= 0 {
		return fmt.Errorf("the container name %s is the renewal agent's, which the operator injects when the annotation %s is \"true\": rename the container",
			fencingv1.AgentContainerName, fencingv1.AgentAnnotation)
	}
	if agent {
		if err := ensureVolume(pod, agentVolume()); err != nil {
			return err
		}
		if findContainer(pod.Spec.InitContainers, fencingv1.AgentContainerName) < 0 {
			pod.Spec.InitContainers = append([]corev1.Container{agentContainer(agentImage)}, pod.Spec.InitContainers...)
		}
	} else if findVolume(pod, fencingv1.AgentVolumeName) >= 0 {
		return fmt.Errorf("the pod already has a volume named %q; rename it: the operator uses that name", fencingv1.AgentVolumeName)
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if err := inject(&list[i], lease); err != nil {
				return err
			}
			run := corev1.VolumeMount{Name: fencingv1.AgentVolumeName, MountPath: fencingv1.AgentMountPath}
			if !agent {
				if err := refuseMount(&list[i], run); err != nil {
					return err
				}
				continue
			}
			// The agent writes its state there; the workload only reads it.
			run.ReadOnly = list[i].Name != fencingv1.AgentContainerName
			if err := ensureMount(&list[i], run); err != nil {
				return err
			}
		}
	}
	return nil
}

// refuseAuthority refuses a pod that brings what only the operator writes: a node, a
// token, a state past Waiting, a standby, a slot, the holder label.
func refuseAuthority(pod *corev1.Pod) error {
	if pod.Spec.NodeName != "" {
		return fmt.Errorf("spec.nodeName is set (%s): a pod bound to a node when it is created cannot be held back by a scheduling gate, "+
			"so it could start before it is granted; remove spec.nodeName and choose the node with nodeSelector or node affinity", pod.Spec.NodeName)
	}
	if _, has := pod.Annotations[fencingv1.TokenAnnotation]; has {
		return fmt.Errorf("pods may not set the annotation %s: only the operator grants tokens", fencingv1.TokenAnnotation)
	}
	if s, has := pod.Annotations[fencingv1.StateAnnotation]; has && s != string(fencingv1.PodWaiting) {
		return fmt.Errorf("pods may not set the annotation %s to %q: only the operator moves a pod past %s",
			fencingv1.StateAnnotation, s, fencingv1.PodWaiting)
	}
	if _, has := pod.Annotations[fencingv1.StandbyAnnotation]; has {
		return fmt.Errorf("pods may not set the annotation %s: the operator sets it from the FencedLease's spec.standby when it lets a Warm candidate run",
			fencingv1.StandbyAnnotation)
	}
	if _, has := pod.Annotations[fencingv1.SlotAnnotation]; has {
		return fmt.Errorf("pods may not set the annotation %s: only the operator assigns slots", fencingv1.SlotAnnotation)
	}
	if _, has := pod.Labels[fencingv1.SlotLabel]; has {
		return fmt.Errorf("pods may not carry the label %s: the operator puts it on the holder of a slot alone; remove it from the pod or its template",
			fencingv1.SlotLabel)
	}
	if _, has := pod.Labels[fencingv1.HolderLabel]; has {
		return fmt.Errorf("pods may not be created with the label %s: the operator puts it on the current holder alone; remove it from the pod or its template",
			fencingv1.HolderLabel)
	}
	return nil
}

// fencingEnv is what every container gets. FENCING_TOKEN resolves when a container
// starts: a Cold candidate's start at its grant, when the token is there; a Warm
// candidate's containers start before any grant, so it is empty there for good, and
// its workload takes the token from the grant it waits for (fencedlease hold,
// pkg/holder, the agent, the file token).
func fencingEnv(lease string) []corev1.EnvVar {
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}
	}
	return []corev1.EnvVar{
		{Name: fencingv1.EnvToken, ValueFrom: field("metadata.annotations['" + fencingv1.TokenAnnotation + "']")},
		{Name: fencingv1.EnvLeaseName, Value: lease},
		{Name: fencingv1.EnvLeaseNamespace, ValueFrom: field("metadata.namespace")},
		{Name: fencingv1.EnvHolderIdentity, ValueFrom: field("metadata.name")},
		{Name: fencingv1.EnvHolderUID, ValueFrom: field("metadata.uid")},
		// The slot annotation, written with the token on a holder of a FencedLease with
		// slots: empty until granted, and without slots.
		{Name: fencingv1.EnvSlot, ValueFrom: field("metadata.annotations['" + fencingv1.SlotAnnotation + "']")},
	}
}

func inject(c *corev1.Container, lease string) error {
	for _, want := range fencingEnv(lease) {
		i := findEnv(c.Env, want.Name)
		if i < 0 {
			c.Env = append(c.Env, want)
			continue
		}
		if !equality.Semantic.DeepEqual(c.Env[i], want) {
			return fmt.Errorf("container %q sets %s: the operator injects the FENCING_* variables; remove them from the pod", c.Name, want.Name)
		}
	}
	return ensureMount(c, corev1.VolumeMount{Name: fencingv1.VolumeName, MountPath: fencingv1.VolumeMountPath, ReadOnly: true})
}

// refuseMount refuses a mount of c at mount's path or of mount's volume: without the
// agent, the pod has no such volume of the operator's.
func refuseMount(c *corev1.Container, mount corev1.VolumeMount) error {
	for _, m := range c.VolumeMounts {
		if m.MountPath == mount.MountPath || m.Name == mount.Name {
			return fmt.Errorf("container %q mounts %s or volume %q; remove it: the operator mounts the agent's state there", c.Name, mount.MountPath, mount.Name)
		}
	}
	return nil
}

// ensureMount adds mount to c, or accepts it there already; a different mount of the
// same volume or path is refused.
func ensureMount(c *corev1.Container, mount corev1.VolumeMount) error {
	for _, m := range c.VolumeMounts {
		if m.MountPath == mount.MountPath || m.Name == mount.Name {
			if !equality.Semantic.DeepEqual(m, mount) {
				return fmt.Errorf("container %q already mounts %s or volume %q; remove it: the operator mounts the fencing files there",
					c.Name, mount.MountPath, mount.Name)
			}
			return nil
		}
	}
	c.VolumeMounts = append(c.VolumeMounts, mount)
	return nil
}

// downwardVolume holds the token, state and slot annotations as files that follow them
// live (slot is empty without slots).
func downwardVolume() corev1.Volume {
	file := func(name, annotation string) corev1.DownwardAPIVolumeFile {
		return corev1.DownwardAPIVolumeFile{Path: name, FieldRef: &corev1.ObjectFieldSelector{
			APIVersion: "v1", FieldPath: "metadata.annotations['" + annotation + "']",
		}}
	}
	items := []corev1.DownwardAPIVolumeFile{file("token", fencingv1.TokenAnnotation), file("state", fencingv1.StateAnnotation),
		file("slot", fencingv1.SlotAnnotation)}
	return corev1.Volume{Name: fencingv1.VolumeName, VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
		Items:       items,
		DefaultMode: ptr.To[int32](0o444),
	}}}
}

// agentVolume is where the agent keeps its state file: in memory, and small.
func agentVolume() corev1.Volume {
	return corev1.Volume{Name: fencingv1.AgentVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("1Mi")),
	}}}
}

func ensureVolume(pod *corev1.Pod, want corev1.Volume) error {
	if i := findVolume(pod, want.Name); i >= 0 {
		if !equality.Semantic.DeepEqual(pod.Spec.Volumes[i], want) {
			return fmt.Errorf("the pod already has a volume named %q; rename it: the operator uses that name", want.Name)
		}
		return nil
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, want)
	return nil
}

func findVolume(pod *corev1.Pod, name string) int {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return i
		}
	}
	return -1
}

// AgentBinary is where the agent image keeps fencedlease-agent; the startupProbe runs it.
const AgentBinary = "/fencedlease-agent"

// agentContainer renews the Lease for workloads that do not use pkg/holder. As a native
// sidecar (an init container that keeps running) it starts before the workload and
// stops after it, and its startupProbe, which passes only once the Lease shows the grant
// renewed, holds the workload's containers back until then: a grant that never renewed
// is one whose workload never ran. It asks for little and runs under the restricted Pod
// Security profile, so it is admitted in restricted namespaces and under ResourceQuotas.
//
// The image is the agent image (the Dockerfile's agent target), whose binary is AgentBinary.
func agentContainer(image string) corev1.Container {
	return corev1.Container{
		Name:          fencingv1.AgentContainerName,
		Image:         image,
		Args:          []string{"agent"},
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		StartupProbe: &corev1.Probe{
			ProbeHandler:   corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{AgentBinary, "agent", "--probe"}}},
			PeriodSeconds:  1,
			TimeoutSeconds: 5,
			// Up to an hour, the longest startup deadline: the operator, not the kubelet,
			// decides when a start took too long.
			FailureThreshold: 3600,
		},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

func hasGate(p *corev1.Pod) bool {
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == fencingv1.SchedulingGate {
			return true
		}
	}
	return false
}

func findEnv(env []corev1.EnvVar, name string) int {
	for i := range env {
		if env[i].Name == name {
			return i
		}
	}
	return -1
}

func findContainer(cs []corev1.Container, name string) int {
	for i := range cs {
		if cs[i].Name == name {
			return i
		}
	}
	return -1
}
