// Package v1alpha1 is the fencing.fencedlease.io/v1alpha1 API: the FencedLease, which
// grants leased, fenced singleton authority to one labeled pod at a time.
//
// +kubebuilder:object:generate=true
// +groupName=fencing.fencedlease.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "fencing.fencedlease.io", Version: "v1alpha1"}

	// SchemeBuilder adds this package's types to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
