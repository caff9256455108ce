package fencedlease

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// CacheOptions shape the manager's cache for the controller: pods and Leases only with
// the lease label (it never needs the rest of the cluster's in memory), and of every
// object only what it reads — no managed fields, pods without their spec and status.
func CacheOptions() cache.Options {
	return cache.Options{ByObject: cacheByObject(), DefaultTransform: cache.TransformStripManagedFields()}
}

func cacheByObject() map[client.Object]cache.ByObject {
	req, err := labels.NewRequirement(fencingv1.LeaseLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key: cannot fail
	}
	labeled := labels.NewSelector().Add(*req)
	return map[client.Object]cache.ByObject{
		&corev1.Pod{}:           {Label: labeled, Transform: slimPod},
		&coordinationv1.Lease{}: {Label: labeled, Transform: cache.TransformStripManagedFields()},
	}
}

// slimPod keeps of a cached pod its metadata (without managed fields), its scheduling
// gates and its phase: all the controller reads. The controller writes pods only with
// patches computed between two such copies, so a stripped field is never written back.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta}
	slim.ManagedFields = nil
	slim.Spec.SchedulingGates = p.Spec.SchedulingGates
	slim.Status.Phase = p.Status.Phase
	return slim, nil
}

// podLeaseIndex indexes cached pods by the FencedLease their label names, so a reconcile
// lists its own pods, not every labeled pod of the namespace: with thousands of
// FencedLeases in one namespace a label-selector list would scan them all, on every
// renewal.
const podLeaseIndex = "fencing.fencedlease.io/lease"

// podLease is the index function of podLeaseIndex.
func podLease(o client.Object) []string {
	if name := o.GetLabels()[fencingv1.LeaseLabel]; name != "" {
		return []string{name}
	}
	return nil
}
