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

// CacheByObject limits the manager's cache of pods and Leases to those carrying the
// lease label: the controller never needs the rest of the cluster's pods in memory.
func CacheByObject() map[client.Object]cache.ByObject {
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
