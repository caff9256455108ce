package fencedlease

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/grantorder"
)

// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch

// Admission gates every candidate alike and reads no FencedLease, so what depends on the
// FencedLease is decided here, from its spec as it is when the operator acts (W1, W2).

// letWarmCandidatesRun removes the gate of fl's waiting candidates that have none of
// their own standby yet when fl is Warm, recording standby Warm in the same patch (W1),
// and turns True the condition W2 set on its pods while fl did not exist. wrote: the
// pass must wait for the cache to show these writes.
func (r *Reconciler) letWarmCandidatesRun(ctx context.Context, fl *fencingv1.FencedLease) (wrote bool, err error) {
	pods, err := r.pods.forLease(fl.Namespace, fl.Name)
	if err != nil {
		return false, err
	}
	warm := fl.Spec.Standby == fencingv1.StandbyWarm && fl.DeletionTimestamp == nil
	for i := range pods {
		p := &pods[i]
		if c := leaseFound(p); c != nil && c.Status != corev1.ConditionTrue {
			if err := r.setLeaseFound(ctx, p, corev1.ConditionTrue, fencingv1.ReasonFencedLeaseFound,
				fmt.Sprintf("FencedLease %q exists", fl.Name)); err != nil {
				return wrote, err
			}
			wrote = true
		}
		if !warm || !awaitsStandby(p) {
			continue
		}
		if err := r.patchPod(ctx, p, func(p *corev1.Pod) {
			p.Spec.SchedulingGates = withoutGate(p.Spec.SchedulingGates)
			setAnnotation(p, fencingv1.StandbyAnnotation, string(fencingv1.StandbyWarm))
		}); err != nil {
			return wrote, err
		}
		wrote = true
	}
	return wrote, nil
}

// notAwaitingW1 leaves out of cands, when fl is Warm, the pods W1 has not let run yet:
// one that arrived after this reconcile's W1 looked is let run by the next, not granted
// as a Cold candidate by this one.
func notAwaitingW1(fl *fencingv1.FencedLease, cands []*corev1.Pod) []*corev1.Pod {
	if fl.Spec.Standby != fencingv1.StandbyWarm || fl.DeletionTimestamp != nil {
		return cands
	}
	return slices.DeleteFunc(cands, awaitsStandby)
}

// awaitsStandby: p awaits its grant, still gated, and no one decided its standby yet.
func awaitsStandby(p *corev1.Pod) bool {
	_, decided := p.Annotations[fencingv1.StandbyAnnotation]
	return !decided && awaitsGrant(p) && hasOurGate(p)
}

func hasOurGate(p *corev1.Pod) bool {
	return len(withoutGate(p.Spec.SchedulingGates)) != len(p.Spec.SchedulingGates)
}

// reportMissing tells each waiting pod whose label names FencedLease key, which does not
// exist, that it waits for it: an event and the condition LeaseFound False, once (W2). A
// pod younger than missingGrace is told only once it is that old, so a FencedLease and
// its pods applied together, in whatever order, cost no writes: retry says when to look
// again.
func (r *Reconciler) reportMissing(ctx context.Context, key types.NamespacedName) (retry time.Duration, err error) {
	pods, err := r.pods.forLease(key.Namespace, key.Name)
	if err != nil {
		return 0, err
	}
	now := r.Clock.Now()
	for i := range pods {
		p := &pods[i]
		if c := leaseFound(p); c != nil && c.Status == corev1.ConditionFalse || !awaitsGrant(p) {
			continue
		}
		// The pod's creation time is the API server's clock: only when to speak depends on it.
		if wait := p.CreationTimestamp.Add(missingGrace).Sub(now); wait > 0 {
			if retry == 0 || wait < retry {
				retry = wait
			}
			continue
		}
		note := fmt.Sprintf("the label %s names FencedLease %q, which does not exist in namespace %q: the pod waits, gated, until it is created",
			fencingv1.LeaseLabel, key.Name, key.Namespace)
		if err := r.setLeaseFound(ctx, p, corev1.ConditionFalse, fencingv1.ReasonFencedLeaseNotFound, note); err != nil {
			return 0, err
		}
		if r.Recorder != nil {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, fencingv1.ReasonFencedLeaseNotFound, "Admit", "%s", note)
		}
	}
	return retry, nil
}

// missingGrace is how long a pod may name a FencedLease that does not exist before it is
// told so (W2).
const missingGrace = 3 * time.Second

// awaitsGrant: p is a candidate that was never granted and can still be.
func awaitsGrant(p *corev1.Pod) bool {
	_, granted := p.Annotations[fencingv1.TokenAnnotation]
	return !granted && p.DeletionTimestamp == nil && !grantorder.Finished(p) && grantorder.PodState(p) == fencingv1.PodWaiting
}

func leaseFound(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == fencingv1.LeaseFoundCondition {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// setLeaseFound writes the condition on p's status by strategic merge, which merges
// conditions by type: the kubelet's and the scheduler's stay as they are.
func (r *Reconciler) setLeaseFound(ctx context.Context, p *corev1.Pod, status corev1.ConditionStatus, reason, message string) error {
	cond := corev1.PodCondition{Type: fencingv1.LeaseFoundCondition, Status: status, Reason: reason, Message: message,
		LastTransitionTime: metav1.NewTime(r.Clock.Now())}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
	if err != nil {
		return err
	}
	from := p.ResourceVersion
	err = r.Status().Patch(ctx, p, client.RawPatch(types.StrategicMergePatchType, patch))
	r.ownWrites.after(p, from, err)
	if err != nil {
		return fmt.Errorf("setting condition %s on pod %s: %w", fencingv1.LeaseFoundCondition, p.Name, err)
	}
	return nil
}
