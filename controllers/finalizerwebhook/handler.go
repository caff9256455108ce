// Package finalizerwebhook puts the operator's finalizer on every FencedLease at its
// creation, so the operator's first reconcile has no metadata write to make before it
// grants (a new FencedLease's grant is then its three writes alone).
//
// It only ever adds the finalizer, and only on CREATE: the operator's own removal, when a
// deleted FencedLease's holder has been revoked, is never undone. It never refuses a
// FencedLease either: its configuration fails open (failurePolicy Ignore), and a
// FencedLease created while the operator cannot answer gets the finalizer from the
// operator's first reconcile, as before this webhook existed.
package finalizerwebhook

import (
	"context"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// Path is where the webhook is served (config/webhook/manifests.yaml names it).
const Path = "/mutate-fencing-fencedlease-io-v1alpha1-fencedlease"

// Handler adds the finalizer. It reads nothing and holds no state.
type Handler struct{}

// Register serves the handler on srv.
func (h Handler) Register(srv webhook.Server) {
	srv.Register(Path, &webhook.Admission{Handler: h})
}

// Handle answers a FencedLease's creation with a patch that adds the operator's finalizer
// after any the creator wrote, or with no patch when it is there already.
func (Handler) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("only a creation gets the finalizer")
	}
	fl := &unstructured.Unstructured{}
	if err := fl.UnmarshalJSON(req.Object.Raw); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if !controllerutil.AddFinalizer(fl, fencingv1.Finalizer) {
		return admission.Allowed("the finalizer is there")
	}
	mutated, err := fl.MarshalJSON()
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated)
}
