package decision

import (
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// SetHeldCondition says whether a pod holds the grant and, when none does, why.
// foreignLease names a Lease of the FencedLease's name that the operator did not create;
// delayed says the next grant waits out the last revocation's lock-delay.
func SetHeldCondition(st *fencingv1.FencedLeaseStatus, fl *fencingv1.FencedLease, foreignLease string, delayed bool) {
	c := metav1.Condition{Type: fencingv1.ConditionHeld, ObservedGeneration: fl.Generation}
	switch {
	case foreignLease != "":
		c.Status, c.Reason = metav1.ConditionFalse, fencingv1.ReasonLeaseConflict
		c.Message = fmt.Sprintf("Lease %s/%s exists and was not created by the operator (it lacks label %s=%s); "+
			"the operator will not adopt it: delete or rename it, or give this FencedLease another name",
			fl.Namespace, foreignLease, fencingv1.LeaseLabel, fl.Name)
	case st.Holder != nil:
		c.Status, c.Reason = metav1.ConditionTrue, fencingv1.ReasonGranted
		c.Message = fmt.Sprintf("pod %s holds token %d", st.Holder.PodName, st.Holder.Token)
		if h := st.Holder; h.FirstRenewTime == nil {
			c.Message += fmt.Sprintf("; starting: it must renew for the first time within the startup deadline (%ds)", h.StartupDeadlineSeconds)
		}
		if ho := st.Holder.Handoff; ho != nil {
			c.Message += fmt.Sprintf("; draining: asked to hand off to pod %s (a newer revision) within %ds", ho.SuccessorName, ho.GracePeriodSeconds)
		}
	case fl.DeletionTimestamp != nil:
		c.Status, c.Reason = metav1.ConditionFalse, fencingv1.ReasonDeleting
		c.Message = "the FencedLease is being deleted; no new grants"
	case st.FencingToken == math.MaxInt64:
		c.Status, c.Reason = metav1.ConditionFalse, fencingv1.ReasonTokensExhausted
		c.Message = fmt.Sprintf("the highest fencing token is %d, the int64 limit: no token is left to grant; "+
			"use a FencedLease of another name", st.FencingToken)
	case delayed && st.Waiting > 0:
		rv := st.LastRevocation
		c.Status, c.Reason = metav1.ConditionFalse, fencingv1.ReasonRevocationDelayed
		c.Message = fmt.Sprintf("%d pod(s) waiting; the next grant waits %ds after the revocation of token %d (%s), "+
			"so the revoked holder's late writes can drain", st.Waiting, rv.DelaySeconds, rv.Token, rv.Reason)
		if rv.NextGrantTime != nil {
			c.Message += ": not before " + rv.NextGrantTime.UTC().Format(time.RFC3339)
		}
	case fl.Spec.Suspend:
		c.Status, c.Reason = metav1.ConditionFalse, fencingv1.ReasonSuspended
		c.Message = fmt.Sprintf("spec.suspend is true; %d pod(s) waiting", st.Waiting)
	default:
		c.Status, c.Reason = metav1.ConditionFalse, fencingv1.ReasonNoCandidates
		c.Message = fmt.Sprintf("no pod labeled %s=%s is waiting in this namespace", fencingv1.LeaseLabel, fl.Name)
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

// SetReadyCondition says whether the FencedLease works as its spec asks, for GitOps tools
// and `kubectl wait --for=condition=Ready`. It reads the Held condition set just before;
// a Held reason it does not know reads as not ready.
func SetReadyCondition(st *fencingv1.FencedLeaseStatus, fl *fencingv1.FencedLease) {
	c := metav1.Condition{Type: fencingv1.ConditionReady, ObservedGeneration: fl.Generation, Status: metav1.ConditionFalse}
	held := meta.FindStatusCondition(st.Conditions, fencingv1.ConditionHeld)
	c.Reason, c.Message = held.Reason, held.Message
	switch {
	case held.Reason == fencingv1.ReasonGranted && st.Holder.FirstRenewTime == nil:
		c.Reason = fencingv1.ReasonHolderStarting
		c.Message = fmt.Sprintf("pod %s is granted token %d and has not renewed yet (startup deadline %ds)",
			st.Holder.PodName, st.Holder.Token, st.Holder.StartupDeadlineSeconds)
	case held.Reason == fencingv1.ReasonGranted:
		c.Status, c.Reason = metav1.ConditionTrue, fencingv1.ReasonHeld
	case held.Reason == fencingv1.ReasonSuspended:
		c.Status = metav1.ConditionTrue
	case held.Reason == fencingv1.ReasonNoCandidates && st.Waiting == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, fencingv1.ReasonIdle, "nobody holds the grant and nobody is waiting"
	case held.Reason == fencingv1.ReasonNoCandidates:
		c.Reason = fencingv1.ReasonWaiting
		c.Message = fmt.Sprintf("%d pod(s) waiting and nobody holds the grant", st.Waiting)
	}
	meta.SetStatusCondition(&st.Conditions, c)
}
