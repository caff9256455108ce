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

// CacheOptions shape the manager's cache for the controller: Leases only with the lease
// label (it never needs the rest of the cluster's in memory), no managed fields. Pods are
// not read through it (podCache keeps them smaller); the label restriction only keeps a
// read that ever did cheap.
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
		&corev1.Pod{}:           {Label: labeled},
		&coordinationv1.Lease{}: {Label: labeled},
	}
}
