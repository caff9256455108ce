package grantorder

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// Candidates are the pods that may be granted next, oldest first (ties by name): those
// the admission webhook made candidates (state Waiting) that can start once granted — a
// Cold one still held back by our scheduling gate and no other, a Warm one with no gate
// at all — and that do not already report that they cannot start (a Warm pod with a bad
// image shows it before any grant). A pod labeled after it was created never went through
// the webhook, and a Cold pod whose gate is gone may already run ungranted: neither is
// ever granted. A pod that ever held a token, or was released or revoked, never gets a
// second grant: one pod, one generation. ended names a grant that ended in this decision,
// before its pod could be marked.
func Candidates(pods []corev1.Pod, st *fencingv1.FencedLeaseStatus, ended types.UID) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.UID == ended || (st.Holder != nil && p.UID == st.Holder.PodUID) ||
			(st.LastRevocation != nil && p.UID == st.LastRevocation.PodUID) {
			continue
		}
		if p.DeletionTimestamp != nil || Finished(p) {
			continue
		}
		if _, has := p.Annotations[fencingv1.TokenAnnotation]; has {
			continue
		}
		if PodState(p) != fencingv1.PodWaiting || StartFailure(p) != "" {
			continue
		}
		if Warm(p) && len(p.Spec.SchedulingGates) != 0 || !Warm(p) && !onlyOurGate(p) {
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

func Finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func PodState(p *corev1.Pod) fencingv1.PodState {
	return fencingv1.PodState(p.Annotations[fencingv1.StateAnnotation])
}

// onlyOurGate is true when our scheduling gate is the only one left: a pod another gate
// still holds (a queue's, say) could not start if granted, and would spend its startup
// deadline and everyone's wait for nothing.
func onlyOurGate(p *corev1.Pod) bool {
	return len(p.Spec.SchedulingGates) == 1 && p.Spec.SchedulingGates[0].Name == fencingv1.SchedulingGate
}

// CannotStartReasons are the container waiting reasons after which a pod does not start
// by itself: the kubelet backs off (an image pull, a crash loop) or needs the pod or its
// config changed. ErrImagePull is not among them: it is a first failure, and the
// kubelet's next report after a retry is ImagePullBackOff. ContainerCreating and
// PodInitializing (a slow pull, a slow volume) are a start in progress.
var CannotStartReasons = map[string]bool{
	"ImagePullBackOff":           true,
	"CrashLoopBackOff":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"InvalidImageName":           true,
}

// StartFailure says why pod p cannot start — a container (or init container) waiting for
// one of cannotStartReasons, or phase Failed — or "" when nothing says so.
func StartFailure(p *corev1.Pod) string {
	if msg := RunFailure(p); msg != "" {
		return msg
	}
	if p.Status.Phase == corev1.PodFailed {
		return fmt.Sprintf("pod phase Failed: %s", p.Status.Message)
	}
	return ""
}

// RunFailure says why a container of pod p, which ran, cannot run again — it waits for one
// of cannotStartReasons: a crash loop (CrashLoopBackOff, repeated OOM kills included), a
// config that broke since — or "" when none does. A container restarted once, and running
// again, is not one: the kubelet reports CrashLoopBackOff only from its second exit in
// a back-off period.
func RunFailure(p *corev1.Pod) string {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, c := range list {
			if w := c.State.Waiting; w != nil && CannotStartReasons[w.Reason] {
				return fmt.Sprintf("container %s: %s: %s%s", c.Name, w.Reason, w.Message, LastExit(c))
			}
		}
	}
	return ""
}

// LastExit describes how container c last ended, when it did ("; last exit: OOMKilled,
// code 137, 3 restarts"), or "".
func LastExit(c corev1.ContainerStatus) string {
	t := c.LastTerminationState.Terminated
	if t == nil {
		return ""
	}
	return fmt.Sprintf("; last exit: %s, code %d, %d restarts", t.Reason, t.ExitCode, c.RestartCount)
}

// Warm is true for a candidate admitted in Warm standby: it runs ungated while it waits.
func Warm(p *corev1.Pod) bool {
	return p.Annotations[fencingv1.StandbyAnnotation] == string(fencingv1.StandbyWarm)
}
