package main

import (
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlease/fencedlease/controllers/admissioncheck"
)

// admissionChecker reports, from the start, whether the admission policies are in place
// and name this operator, and what admits candidate pods (the candidate policy with
// agentImage, or the pod webhook of MutatingWebhookConfiguration podWebhook when it is
// served); its events are about the operator's own pod when it knows it.
func admissionChecker(mgr ctrl.Manager, m *admissioncheck.Metrics, agentImage, podWebhook string) (*admissioncheck.Checker, error) {
	var regarding runtime.Object
	if name, ns := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE"); name != "" && ns != "" {
		p := &corev1.Pod{}
		p.Name, p.Namespace = name, ns
		p.APIVersion, p.Kind = "v1", "Pod"
		regarding = p
	}
	uncached, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, err
	}
	return &admissioncheck.Checker{
		Client:               uncached,
		Recorder:             mgr.GetEventRecorder("fencedlease-admission-check"),
		Regarding:            regarding,
		Metrics:              m,
		AgentImage:           agentImage,
		WebhookConfiguration: podWebhook,
	}, nil
}
