package fencedlease

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Labels and annotations the workload controllers put on what they create.
const (
	podTemplateHashLabel         = appsv1.DefaultDeploymentUniqueLabelKey // "pod-template-hash"
	controllerRevisionLabel      = appsv1.ControllerRevisionHashLabelKey  // "controller-revision-hash"
	deploymentRevisionAnnotation = "deployment.kubernetes.io/revision"
)

// newerRevision returns the first of cands (they come oldest first) that belongs to a
// newer revision of the holder's own Deployment or StatefulSet, or nil. It reads the
// owning ReplicaSets or the StatefulSet uncached, and only when a candidate's labels
// already show another revision of the same workload, so a quiet FencedLease costs no
// request.
func (r *Reconciler) newerRevision(ctx context.Context, holder *corev1.Pod, cands []*corev1.Pod) (*corev1.Pod, error) {
	owner := metav1.GetControllerOf(holder)
	if owner == nil {
		return nil, nil
	}
	switch owner.Kind {
	case "ReplicaSet":
		return r.newerDeploymentRevision(ctx, holder, owner, cands)
	case "StatefulSet":
		return r.newerStatefulSetRevision(ctx, holder, owner, cands)
	}
	return nil, nil
}

// newerDeploymentRevision: a candidate of another ReplicaSet of the same Deployment
// whose revision (the Deployment controller's annotation) is higher. A rollback makes an
// old ReplicaSet the newest revision again, so the number decides, not the age.
func (r *Reconciler) newerDeploymentRevision(ctx context.Context, holder *corev1.Pod, owner *metav1.OwnerReference, cands []*corev1.Pod) (*corev1.Pod, error) {
	hash := holder.Labels[podTemplateHashLabel]
	deployment, ok := strings.CutSuffix(owner.Name, "-"+hash)
	if hash == "" || !ok {
		return nil, nil
	}
	var mine *appsv1.ReplicaSet
	for _, c := range cands {
		co := metav1.GetControllerOf(c)
		ch := c.Labels[podTemplateHashLabel]
		if co == nil || co.Kind != "ReplicaSet" || co.UID == owner.UID || ch == "" || co.Name != deployment+"-"+ch {
			continue
		}
		if mine == nil {
			var err error
			if mine, err = r.replicaSet(ctx, holder.Namespace, owner.Name, owner.UID); err != nil || mine == nil {
				return nil, err
			}
		}
		theirs, err := r.replicaSet(ctx, c.Namespace, co.Name, co.UID)
		if err != nil {
			return nil, err
		}
		if theirs != nil && sameController(mine, theirs) && revision(theirs) > revision(mine) {
			return c, nil
		}
	}
	return nil, nil
}

// newerStatefulSetRevision: a candidate of the same StatefulSet created from its update
// revision while the holder was not.
func (r *Reconciler) newerStatefulSetRevision(ctx context.Context, holder *corev1.Pod, owner *metav1.OwnerReference, cands []*corev1.Pod) (*corev1.Pod, error) {
	var sts *appsv1.StatefulSet
	for _, c := range cands {
		co := metav1.GetControllerOf(c)
		if co == nil || co.UID != owner.UID || c.Labels[controllerRevisionLabel] == holder.Labels[controllerRevisionLabel] {
			continue
		}
		if sts == nil {
			sts = &appsv1.StatefulSet{}
			switch err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: holder.Namespace, Name: owner.Name}, sts); {
			case apierrors.IsNotFound(err):
				return nil, nil
			case err != nil:
				return nil, fmt.Errorf("reading StatefulSet %s: %w", owner.Name, err)
			}
		}
		if update := sts.Status.UpdateRevision; update != "" && c.Labels[controllerRevisionLabel] == update {
			return c, nil
		}
	}
	return nil, nil
}

// replicaSet reads ReplicaSet (name, uid) uncached; nil when gone or replaced.
func (r *Reconciler) replicaSet(ctx context.Context, ns, name string, uid types.UID) (*appsv1.ReplicaSet, error) {
	return readByUID(ctx, r.apiReader, &appsv1.ReplicaSet{}, ns, name, uid)
}

func sameController(a, b metav1.Object) bool {
	ca, cb := metav1.GetControllerOf(a), metav1.GetControllerOf(b)
	return ca != nil && cb != nil && ca.UID == cb.UID
}

// revision is a ReplicaSet's Deployment revision; 0 when missing or malformed.
func revision(rs *appsv1.ReplicaSet) int64 {
	v, err := strconv.ParseInt(rs.Annotations[deploymentRevisionAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return v
}
