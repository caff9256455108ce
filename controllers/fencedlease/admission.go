package fencedlease

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/internal/grantorder"
)

// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch

// Admission gates every candidate alike and reads no FencedLease, so what depends on the
// FencedLease is decided here, from its spec as it is when the operator acts (W1, W2), and
// a labeled pod admission never saw is reported here (W3).

// finishAdmission removes the gate of fl's waiting candidates that have none of their own
// standby yet when fl is Warm, recording standby Warm in the same patch (W1), turns True
// the condition W2 set on its pods while fl did not exist, and tells a labeled pod that
// admission never made a candidate so, once (W3). wrote: the pass must wait for the cache
// to show these writes.
func (r *Reconciler) finishAdmission(ctx context.Context, fl *fencingv1.FencedLease) (wrote bool, err error) {
	pods, err := r.pods.forLease(fl.Namespace, fl.Name)
	if err != nil {
		return false, err
	}
	warm := fl.Spec.Standby == fencingv1.StandbyWarm && fl.DeletionTimestamp == nil
	for i := range pods {
		p := &pods[i]
		if c := podCondition(p, fencingv1.LeaseFoundCondition); c != nil && c.Status != corev1.ConditionTrue {
			if err := r.setCondition(ctx, p, fencingv1.LeaseFoundCondition, corev1.ConditionTrue, fencingv1.ReasonFencedLeaseFound,
				fmt.Sprintf("FencedLease %q exists", fl.Name)); err != nil {
				return wrote, err
			}
			wrote = true
		}
		if neverAdmitted(p) && podCondition(p, fencingv1.AdmittedCondition) == nil {
			if err := r.reportNotAdmitted(ctx, p); err != nil {
				return wrote, err
			}
			wrote = true
		}
		if !warm || !decision.AwaitsStandby(p) {
			continue
		}
		if err := r.patchPod(ctx, p, func(p *corev1.Pod) {
			p.Spec.SchedulingGates = decision.WithoutGate(p.Spec.SchedulingGates)
			setAnnotation(p, fencingv1.StandbyAnnotation, string(fencingv1.StandbyWarm))
		}); err != nil {
			return wrote, err
		}
		wrote = true
	}
	return wrote, nil
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
	now := r.clock.Now()
	for i := range pods {
		p := &pods[i]
		if c := podCondition(p, fencingv1.LeaseFoundCondition); c != nil && c.Status == corev1.ConditionFalse || !decision.AwaitsGrant(p) {
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
		if err := r.setCondition(ctx, p, fencingv1.LeaseFoundCondition, corev1.ConditionFalse, fencingv1.ReasonFencedLeaseNotFound, note); err != nil {
			return 0, err
		}
		if r.recorder != nil {
			r.recorder.Eventf(p, nil, corev1.EventTypeWarning, fencingv1.ReasonFencedLeaseNotFound, "Admit", "%s", note)
		}
	}
	return retry, nil
}

// missingGrace is how long a pod may name a FencedLease that does not exist before it is
// told so (W2).
const missingGrace = 3 * time.Second

// neverAdmitted: p carries the lease label but admission never made it a candidate (no
// state), and it still runs or may.
func neverAdmitted(p *corev1.Pod) bool {
	_, admitted := p.Annotations[fencingv1.StateAnnotation]
	return !admitted && p.DeletionTimestamp == nil && !grantorder.Finished(p)
}

// reportNotAdmitted tells p that admission never saw it (W3): the condition Admitted
// False and a Warning event. It is never granted; its controller recreates it through
// admission once it is deleted.
func (r *Reconciler) reportNotAdmitted(ctx context.Context, p *corev1.Pod) error {
	note := fmt.Sprintf("created with the label %s but not admitted as a candidate (no admission was in place, "+
		"or the API server had not loaded the MutatingAdmissionPolicy fencedlease-candidate yet): it is not gated and is never granted; "+
		"delete it, and its controller recreates it through admission", fencingv1.LeaseLabel)
	if err := r.setCondition(ctx, p, fencingv1.AdmittedCondition, corev1.ConditionFalse, fencingv1.ReasonNotAdmitted, note); err != nil {
		return err
	}
	if r.recorder != nil {
		r.recorder.Eventf(p, nil, corev1.EventTypeWarning, fencingv1.ReasonNotAdmitted, "Admit", "%s", note)
	}
	return nil
}

// podCondition is p's condition of type t, or nil.
func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// setCondition writes condition t on p's status by strategic merge, which merges
// conditions by type: the kubelet's and the scheduler's stay as they are.
func (r *Reconciler) setCondition(ctx context.Context, p *corev1.Pod, t corev1.PodConditionType, status corev1.ConditionStatus, reason, message string) error {
	cond := corev1.PodCondition{Type: t, Status: status, Reason: reason, Message: message,
		LastTransitionTime: metav1.NewTime(r.clock.Now())}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
	if err != nil {
		return err
	}
	from := p.ResourceVersion
	err = r.Status().Patch(ctx, p, client.RawPatch(types.StrategicMergePatchType, patch))
	r.ownWrites.after(p, from, err)
	if err != nil {
		return fmt.Errorf("setting condition %s on pod %s: %w", t, p.Name, err)
	}
	return nil
}
