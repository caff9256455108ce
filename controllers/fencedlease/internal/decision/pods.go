package decision

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// successorWaits: pod p, a hand-off's successor, is still a waiting candidate.
func successorWaits(p *corev1.Pod) bool {
	return p != nil && p.DeletionTimestamp == nil && !grantorder.Finished(p) && grantorder.PodState(p) == fencingv1.PodWaiting
}

// FindPod finds the pod with uid among pods.
func FindPod(pods []corev1.Pod, uid types.UID) *corev1.Pod {
	for i := range pods {
		if pods[i].UID == uid {
			return &pods[i]
		}
	}
	return nil
}

// FindCandidate finds the candidate with uid; nil when uid is empty or not among them.
func FindCandidate(cands []*corev1.Pod, uid types.UID) *corev1.Pod {
	for _, c := range cands {
		if uid != "" && c.UID == uid {
			return c
		}
	}
	return nil
}

// ParseToken and FormatToken read and write a token annotation, on pods as on Leases.
var (
	ParseToken  = leaserecord.ParseToken
	FormatToken = leaserecord.FormatToken
)

// UnschedulableBound is how long a granted pod that never renewed may stay unschedulable,
// on the controller's clock from the grant, before it is revoked (PodCannotStart): long
// enough for a scheduler retry and a preemption, short of a cluster autoscaler's node.
const UnschedulableBound = 60 * time.Second

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
	return fmt.Sprintf("container %s: restarted%s", worst.Name, grantorder.LastExit(*worst))
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

// endedOnPod: pod p shows that its grant of token ended (X5, L3): marked Released or
// Revoked with that token.
func endedOnPod(p *corev1.Pod, token int64) bool {
	st := grantorder.PodState(p)
	return (st == fencingv1.PodReleased || st == fencingv1.PodRevoked) && leaserecord.ParseToken(p.Annotations) == token
}

// NotAwaitingW1 leaves out of cands, when fl is Warm, the pods W1 has not let run yet:
// one that arrived after this reconcile's W1 looked is let run by the next, not granted
// as a Cold candidate by this one.
func NotAwaitingW1(fl *fencingv1.FencedLease, cands []*corev1.Pod) []*corev1.Pod {
	if fl.Spec.Standby != fencingv1.StandbyWarm || fl.DeletionTimestamp != nil {
		return cands
	}
	return slices.DeleteFunc(cands, AwaitsStandby)
}

// AwaitsStandby: p awaits its grant, still gated, and no one decided its standby yet.
func AwaitsStandby(p *corev1.Pod) bool {
	_, decided := p.Annotations[fencingv1.StandbyAnnotation]
	return !decided && AwaitsGrant(p) && hasOurGate(p)
}

func hasOurGate(p *corev1.Pod) bool {
	return len(WithoutGate(p.Spec.SchedulingGates)) != len(p.Spec.SchedulingGates)
}

// AwaitsGrant: p is a candidate that was never granted and can still be.
func AwaitsGrant(p *corev1.Pod) bool {
	_, granted := p.Annotations[fencingv1.TokenAnnotation]
	return !granted && p.DeletionTimestamp == nil && !grantorder.Finished(p) && grantorder.PodState(p) == fencingv1.PodWaiting
}

func WithoutGate(gates []corev1.PodSchedulingGate) []corev1.PodSchedulingGate {
	var out []corev1.PodSchedulingGate
	for _, g := range gates {
		if g.Name != fencingv1.SchedulingGate {
			out = append(out, g)
		}
	}
	return out
}
