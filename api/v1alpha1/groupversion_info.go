// Package v1alpha1 is the fencing.fencedlease.io/v1alpha1 API: the FencedLease, which
// grants leased, fenced singleton authority to one labeled pod at a time.
//
// +kubebuilder:object:generate=true
// +groupName=fencing.fencedlease.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "fencing.fencedlease.io", Version: "v1alpha1"}

	// SchemeBuilder adds this package's types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &FencedLease{}, &FencedLeaseList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
