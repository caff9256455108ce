package fencedlease

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// successorWaits: the pod with uid is still a waiting candidate.
func successorWaits(pods []corev1.Pod, uid types.UID) bool {
	p := findPod(pods, uid)
	return p != nil && p.DeletionTimestamp == nil && !grantorder.Finished(p) && grantorder.PodState(p) == fencingv1.PodWaiting
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

// parseToken and formatToken read and write a token annotation, on pods as on Leases.
var (
	parseToken  = leaserecord.ParseToken
	formatToken = leaserecord.FormatToken
)

// unschedulableBound is how long a granted pod that never renewed may stay unschedulable,
// on the controller's clock from the grant, before it is revoked (PodCannotStart): long
// enough for a scheduler retry and a preemption, short of a cluster autoscaler's node.
const unschedulableBound = 60 * time.Second

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

// readByUID reads object (name, uid) into obj uncached; nil when it is gone or another
// object now has its name.
func readByUID[T client.Object](ctx context.Context, reader client.Reader, obj T, ns, name string, uid types.UID) (T, error) {
	var none T
	switch err := reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj); {
	case apierrors.IsNotFound(err):
		return none, nil
	case err != nil:
		return none, fmt.Errorf("reading %T %s: %w", obj, name, err)
	case obj.GetUID() != uid:
		return none, nil
	}
	return obj, nil
}

// podWithUID reads, uncached, the pod of namespace ns with uid, whatever its labels: the
// pod of a grant only a Lease records, which released it there (its name went with
// holderIdentity) and is not among the labeled pods — gone, or its label taken off. A
// list of the namespace's pods, made only then. nil when there is none.
func podWithUID(ctx context.Context, reader client.Reader, ns string, uid types.UID) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := reader.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return findPod(pods.Items, uid), nil
}

// endedOnPod: pod p shows that its grant of token ended (X5, L3): marked Released or
// Revoked with that token.
func endedOnPod(p *corev1.Pod, token int64) bool {
	st := grantorder.PodState(p)
	return (st == fencingv1.PodReleased || st == fencingv1.PodRevoked) && leaserecord.ParseToken(p.Annotations) == token
}
