package fencedlease

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// setHeldCondition says whether a pod holds the grant and, when none does, why.
func setHeldCondition(st *fencingv1.FencedLeaseStatus, fl *fencingv1.FencedLease) {
	c := metav1.Condition{Type: fencingv1.ConditionHeld, ObservedGeneration: fl.Generation}
	switch {
	case st.Holder != nil:
		c.Status, c.Reason = metav1.ConditionTrue, fencingv1.ReasonGranted
		c.Message = fmt.Sprintf("pod %s holds token %d", st.Holder.PodName, st.Holder.Token)
	case fl.DeletionTimestamp != nil:
		c.Status, c.Reason = metav1.ConditionFalse, fencingv1.ReasonDeleting
		c.Message = "the FencedLease is being deleted; no new grants"
	case fl.Spec.Suspend:
		c.Status, c.Reason = metav1.ConditionFalse, fencingv1.ReasonSuspended
		c.Message = fmt.Sprintf("spec.suspend is true; %d pod(s) waiting", st.Waiting)
	default:
		c.Status, c.Reason = metav1.ConditionFalse, fencingv1.ReasonNoCandidates
		c.Message = fmt.Sprintf("no pod labeled %s=%s is waiting in this namespace", fencingv1.LeaseLabel, fl.Name)
	}
	meta.SetStatusCondition(&st.Conditions, c)
}
