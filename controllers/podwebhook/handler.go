package podwebhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// Path is where the webhook is served.
const Path = "/mutate-v1-pod"

// +kubebuilder:rbac:groups=fencing.fencedlease.io,resources=fencedleases,verbs=get;list;watch

// Handler admits candidate pods. Build it with NewHandler.
type Handler struct {
	// reader finds the FencedLease a pod names; uncached, so a FencedLease created a
	// moment ago is found.
	reader     client.Reader
	decoder    admission.Decoder
	agentImage string
}

// NewHandler builds the pod webhook's handler: reader must read uncached (a manager's
// APIReader), scheme must know pods, agentImage is the sidecar injected where a pod asks
// for the agent. A missing one is an error, not a default.
func NewHandler(reader client.Reader, scheme *runtime.Scheme, agentImage string) (*Handler, error) {
	switch {
	case reader == nil:
		return nil, errors.New("podwebhook: a reader is required (the manager's APIReader)")
	case scheme == nil:
		return nil, errors.New("podwebhook: a scheme is required")
	case agentImage == "":
		return nil, errors.New("podwebhook: the agent image is required (--agent-image, AGENT_IMAGE)")
	}
	return &Handler{reader: reader, decoder: admission.NewDecoder(scheme), agentImage: agentImage}, nil
}

// Register serves the handler on srv.
func (h *Handler) Register(srv webhook.Server) {
	srv.Register(Path, &webhook.Admission{Handler: h})
}

// Handle mutates a pod on CREATE, or denies it with a message a user can act on.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := h.decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	lease, ok := pod.Labels[fencingv1.LeaseLabel]
	if !ok {
		return admission.Allowed("not a candidate")
	}
	if lease == "" {
		return admission.Denied(fmt.Sprintf("label %s must name a FencedLease in this namespace", fencingv1.LeaseLabel))
	}
	ns := req.Namespace
	fl := &fencingv1.FencedLease{}
	err := h.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: lease}, fl)
	switch {
	case apierrors.IsNotFound(err):
		return admission.Denied(fmt.Sprintf("label %s names FencedLease %q, which does not exist in namespace %q: create it first, or fix the label",
			fencingv1.LeaseLabel, lease, ns))
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("looking up FencedLease %q: %w", lease, err))
	}
	before := pod.DeepCopy()
	if err := mutate(pod, lease, fl.Spec.Standby, h.agentImage); err != nil {
		return admission.Denied(err.Error())
	}
	patches, err := patchFor(before, pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.Patched("", patches...)
}
