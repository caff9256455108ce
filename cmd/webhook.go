package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fencedlease/fencedlease/controllers/finalizerwebhook"
	"github.com/fencedlease/fencedlease/controllers/podwebhook"
)

type webhookOptions struct {
	enabled     bool
	host        string
	port        int
	certDir     string
	rotateCerts bool
	// certsFromSecret: the certificate folder is filled from the Secret through the API
	// (certSync), not by a Secret volume; false where the files are there already.
	certsFromSecret bool
	secretName      string
	serviceName     string
	configuration   string
	agentImage      string
}

func (o *webhookOptions) bind(fs *flag.FlagSet) {
	fs.BoolVar(&o.enabled, "webhook", false,
		"Serve the admission webhooks (pods; the finalizer on new FencedLeases): Kubernetes 1.30-1.35, where no MutatingAdmissionPolicy admits candidates (config/webhook).")
	fs.IntVar(&o.port, "webhook-port", 9443, "Port of the webhook server.")
	fs.StringVar(&o.certDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Folder of the webhook's tls.crt and tls.key.")
	fs.BoolVar(&o.rotateCerts, "webhook-cert-rotation", true,
		"Provision and rotate the webhook's serving certificate and inject its CA; false when cert-manager does it.")
	fs.BoolVar(&o.certsFromSecret, "webhook-certs-from-secret", true,
		"Write the webhook's certificate from its Secret (--webhook-secret-name) into --webhook-cert-dir, read through the API; false when the folder is filled otherwise (a Secret volume).")
	fs.StringVar(&o.secretName, "webhook-secret-name", "fencedlease-webhook-server-cert", "Secret holding the webhook certificate.")
	fs.StringVar(&o.serviceName, "webhook-service-name", "fencedlease-webhook-service", "Service in front of the webhook.")
	fs.StringVar(&o.configuration, "webhook-configuration-name", "fencedlease-mutating-webhook-configuration",
		"MutatingWebhookConfiguration whose caBundle the operator keeps current.")
	fs.StringVar(&o.agentImage, "agent-image", os.Getenv("AGENT_IMAGE"), "Image of the renewal agent sidecar, the Dockerfile's agent target (default $AGENT_IMAGE).")
}

// serveLocally serves the webhooks, when enabled, where the embedded control plane calls
// them, with the certificate it generated; the agent image is the one the policies there
// were installed with.
func (o *webhookOptions) serveLocally(w envtest.WebhookInstallOptions) {
	o.agentImage = localAgentImage
	o.rotateCerts, o.certsFromSecret = false, false
	o.host, o.port, o.certDir = w.LocalServingHost, w.LocalServingPort, w.LocalServingCertDir
}

// localAgentImage is the agent image on the embedded control plane, where no kubelet pulls it.
const localAgentImage = "fencedlease-agent:dev"

// setupWebhook serves the pod and FencedLease webhooks once their certificate is on disk:
// put in its Secret by cert-controller (the default, so a plain kubectl apply works) or by
// cert-manager, and written from there by certSync.
func setupWebhook(mgr ctrl.Manager, o webhookOptions) error {
	if !o.enabled {
		return nil
	}
	if o.agentImage == "" {
		return errors.New("--agent-image (or AGENT_IMAGE) is required with --webhook")
	}
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" && (o.rotateCerts || o.certsFromSecret) {
		return errors.New("--webhook-cert-rotation and --webhook-certs-from-secret need POD_NAMESPACE (the operator's namespace)")
	}
	secret := types.NamespacedName{Namespace: ns, Name: o.secretName}
	rotated := make(chan struct{})
	if o.rotateCerts {
		if err := rotator.AddRotator(mgr, &rotator.CertRotator{
			SecretKey:      secret,
			CertDir:        o.certDir,
			CAName:         "fencedlease-ca",
			CAOrganization: "fencedlease",
			DNSName:        fmt.Sprintf("%s.%s.svc", o.serviceName, ns),
			IsReady:        rotated,
			Webhooks:       []rotator.WebhookInfo{{Name: o.configuration, Type: rotator.Mutating}},
		}); err != nil {
			return fmt.Errorf("setting up certificate rotation: %w", err)
		}
	} else {
		close(rotated)
	}
	written := make(chan struct{})
	if o.certsFromSecret {
		sync := newCertSync(mgr.GetAPIReader(), secret, o.certDir)
		if err := mgr.Add(sync); err != nil {
			return err
		}
		written = sync.written
	} else {
		close(written)
	}
	ready := make(chan struct{})
	go func() {
		<-written
		<-rotated
		close(ready)
	}()
	h, err := podwebhook.NewHandler(mgr.GetScheme(), o.agentImage)
	if err != nil {
		return err
	}
	go func() {
		<-ready
		h.Register(mgr.GetWebhookServer())
		finalizerwebhook.Handler{}.Register(mgr.GetWebhookServer())
	}()
	// Not ready until the webhook serves: a labeled pod must never find it missing.
	return mgr.AddReadyzCheck("webhook", func(r *http.Request) error {
		select {
		case <-ready:
			return mgr.GetWebhookServer().StartedChecker()(r)
		default:
			return errors.New("webhook certificate not ready")
		}
	})
}
