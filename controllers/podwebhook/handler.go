package podwebhook

import (
	"context"
	"errors"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// Path is where the webhook is served.
const Path = "/mutate-v1-pod"

// Handler admits candidate pods. Build it with NewHandler.
type Handler struct {
	decoder    admission.Decoder
	agentImage string
}

// NewHandler builds the pod webhook's handler: scheme must know pods, agentImage is the
// sidecar injected where a pod asks for the agent. A missing one is an error, not a
// default.
func NewHandler(scheme *runtime.Scheme, agentImage string) (*Handler, error) {
	switch {
	case scheme == nil:
		return nil, errors.New("podwebhook: a scheme is required")
	case agentImage == "":
		return nil, errors.New("podwebhook: the agent image is required (--agent-image, AGENT_IMAGE)")
	}
	return &Handler{decoder: admission.NewDecoder(scheme), agentImage: agentImage}, nil
}

// Register serves the handler on srv.
func (h *Handler) Register(srv webhook.Server) {
	srv.Register(Path, &webhook.Admission{Handler: h})
}

// Handle mutates a pod on CREATE, or denies it with a message a user can act on.
func (h *Handler) Handle(_ context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := h.decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if _, ok := pod.Labels[fencingv1.LeaseLabel]; !ok {
		return admission.Allowed("not a candidate")
	}
	before := pod.DeepCopy()
	if err := Admit(pod, h.agentImage); err != nil {
		return admission.Denied(err.Error())
	}
	patches, err := patchFor(before, pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.Patched("", patches...)
}
