package fencedlease

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// NewScheme is the operator's scheme: the built-in types and fencing.fencedlease.io.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(fencingv1.AddToScheme(s))
	return s
}
