// Package webhook embeds the operator's webhook configuration (the pod webhook and the
// FencedLease finalizer webhook), so the binary can serve them on the embedded local
// control plane.
package webhook

import (
	_ "embed"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

//go:embed manifests.yaml
var manifests []byte

// Configuration is the MutatingWebhookConfiguration in manifests.yaml.
func Configuration() (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	c := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(manifests, c); err != nil {
		return nil, err
	}
	return c, nil
}
