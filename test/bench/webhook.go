package bench

import (
	"context"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	webhookconfig "github.com/fencedlease/fencedlease/config/webhook"
	"github.com/fencedlease/fencedlease/controllers/finalizerwebhook"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// finalizerWebhookOnly is the webhook component's configuration with the FencedLease webhook
// alone, for envtest to point at a local server: new FencedLeases come with the
// operator's finalizer, as in the webhook install. The pod webhook stays out: the bench creates its
// pods gated itself, and client-go's side has no such call either.
func finalizerWebhookOnly() (envtest.WebhookInstallOptions, error) {
	cfg, err := webhookconfig.Configuration()
	if err != nil {
		return envtest.WebhookInstallOptions{}, err
	}
	cfg.Webhooks = slices.DeleteFunc(cfg.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool {
		return w.ClientConfig.Service == nil || w.ClientConfig.Service.Path == nil || *w.ClientConfig.Service.Path != finalizerwebhook.Path
	})
	if len(cfg.Webhooks) != 1 {
		return envtest.WebhookInstallOptions{}, fmt.Errorf("config/webhook has %d webhooks at %s, want 1", len(cfg.Webhooks), finalizerwebhook.Path)
	}
	return envtest.WebhookInstallOptions{MutatingWebhooks: []*admissionregistrationv1.MutatingWebhookConfiguration{cfg}}, nil
}

// serveFinalizerWebhook serves it in this process, where envtest pointed it (the handler
// reads nothing and holds nothing: the API server's cost is the call, wherever it runs).
func serveFinalizerWebhook(ctx context.Context, o *envtest.WebhookInstallOptions) error {
	_, err := testenv.ServeWebhook(ctx, o, map[string]*webhook.Admission{finalizerwebhook.Path: {Handler: finalizerwebhook.Handler{}}})
	return err
}
