package fencedlease

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/leaserecord"
)

// candidates are the pods that may be granted next, oldest first (ties by name): those
// the admission webhook made candidates (state Waiting) that can start once granted — a
// Cold one still held back by our scheduling gate and no other, a Warm one with no gate
// at all — and that do not already report that they cannot start (a Warm pod with a bad
// image shows it before any grant). A pod labeled after it was created never went through
// the webhook, and a Cold pod whose gate is gone may already run ungranted: neither is
// ever granted. A pod that ever held a token, or was released or revoked, never gets a
// second grant: one pod, one generation. ended names a grant that ended in this decision,
// before its pod could be marked.
func candidates(pods []corev1.Pod, st *fencingv1.FencedLeaseStatus, ended types.UID) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.UID == ended || (st.Holder != nil && p.UID == st.Holder.PodUID) ||
			(st.LastRevocation != nil && p.UID == st.LastRevocation.PodUID) {
			continue
		}
		if p.DeletionTimestamp != nil || finished(p) {
			continue
		}
		if _, has := p.Annotations[fencingv1.TokenAnnotation]; has {
			continue
		}
		if podState(p) != fencingv1.PodWaiting || startFailure(p) != "" {
			continue
		}
		if warm(p) && len(p.Spec.SchedulingGates) != 0 || !warm(p) && !onlyOurGate(p) {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func podState(p *corev1.Pod) fencingv1.PodState {
	return fencingv1.PodState(p.Annotations[fencingv1.StateAnnotation])
}

// successorWaits: the pod with uid is still a waiting candidate.
func successorWaits(pods []corev1.Pod, uid types.UID) bool {
	p := findPod(pods, uid)
	return p != nil && p.DeletionTimestamp == nil && !finished(p) && podState(p) == fencingv1.PodWaiting
}

// findPod finds the pod with uid among pods.
func findPod(pods []corev1.Pod, uid types.UID) *corev1.Pod {
	for i := range pods {
		if pods[i].UID == uid {
			return &pods[i]
		}
	}
	return nil
}

// findCandidate finds the candidate with uid; nil when uid is empty or not among them.
func findCandidate(cands []*corev1.Pod, uid types.UID) *corev1.Pod {
	for _, c := range cands {
		if uid != "" && c.UID == uid {
			return c
		}
	}
	return nil
}

// onlyOurGate is true when our scheduling gate is the only one left: a pod another gate
// still holds (a queue's, say) could not start if granted, and would spend its startup
// deadline and everyone's wait for nothing.
func onlyOurGate(p *corev1.Pod) bool {
	return len(p.Spec.SchedulingGates) == 1 && p.Spec.SchedulingGates[0].Name == fencingv1.SchedulingGate
}

// parseToken and formatToken read and write a token annotation, on pods as on Leases.
var (
	parseToken  = leaserecord.ParseToken
	formatToken = leaserecord.FormatToken
)

// cannotStartReasons are the container waiting reasons after which a pod does not start
// by itself: the kubelet backs off (an image pull, a crash loop) or needs the pod or its
// config changed. ErrImagePull is not among them: it is a first failure, and the
// kubelet's next report after a retry is ImagePullBackOff. ContainerCreating and
// PodInitializing (a slow pull, a slow volume) are a start in progress.
var cannotStartReasons = map[string]bool{
	"ImagePullBackOff":           true,
	"CrashLoopBackOff":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"InvalidImageName":           true,
}

// unschedulableBound is how long a granted pod that never renewed may stay unschedulable,
// on the controller's clock from the grant, before it is revoked (PodCannotStart): long
// enough for a scheduler retry and a preemption, short of a cluster autoscaler's node.
const unschedulableBound = 60 * time.Second

// startFailure says why pod p cannot start — a container (or init container) waiting for
// one of cannotStartReasons, or phase Failed — or "" when nothing says so.
func startFailure(p *corev1.Pod) string {
	if msg := runFailure(p); msg != "" {
		return msg
	}
	if p.Status.Phase == corev1.PodFailed {
		return fmt.Sprintf("pod phase Failed: %s", p.Status.Message)
	}
	return ""
}

// runFailure says why a container of pod p, which ran, cannot run again — it waits for one
// of cannotStartReasons: a crash loop (CrashLoopBackOff, repeated OOM kills included), a
// config that broke since — or "" when none does. A container restarted once, and running
// again, is not one: the kubelet reports CrashLoopBackOff only from its second exit in
// a back-off period.
func runFailure(p *corev1.Pod) string {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, c := range list {
			if w := c.State.Waiting; w != nil && cannotStartReasons[w.Reason] {
				return fmt.Sprintf("container %s: %s: %s%s", c.Name, w.Reason, w.Message, lastExit(c))
			}
		}
	}
	return ""
}

// lastCrash describes the last exit of the container of pod p that restarted most
// ("container work: running again; last exit: Error, code 1, 2 restarts"), or "" when none
// restarted.
func lastCrash(p *corev1.Pod) string {
	var worst *corev1.ContainerStatus
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			if c := &list[i]; c.RestartCount > 0 && c.LastTerminationState.Terminated != nil &&
				(worst == nil || c.RestartCount > worst.RestartCount) {
				worst = c
			}
		}
	}
	if worst == nil {
		return ""
	}
	return fmt.Sprintf("container %s: restarted%s", worst.Name, lastExit(*worst))
}

// lastExit describes how container c last ended, when it did ("; last exit: OOMKilled,
// code 137, 3 restarts"), or "".
func lastExit(c corev1.ContainerStatus) string {
	t := c.LastTerminationState.Terminated
	if t == nil {
		return ""
	}
	return fmt.Sprintf("; last exit: %s, code %d, %d restarts", t.Reason, t.ExitCode, c.RestartCount)
}

// unschedulable is the scheduler's message when it reports pod p unschedulable, or "".
func unschedulable(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return "unschedulable: " + c.Message
		}
	}
	return ""
}

// warm is true for a candidate admitted in Warm standby: it runs ungated while it waits.
func warm(p *corev1.Pod) bool {
	return p.Annotations[fencingv1.StandbyAnnotation] == string(fencingv1.StandbyWarm)
}
