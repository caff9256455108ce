package webhook

import (
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/fencedlease/fencedlease/controllers/finalizerwebhook"
	"github.com/fencedlease/fencedlease/controllers/podwebhook"
)

func webhookAt(t *testing.T, path string) admissionregistrationv1.MutatingWebhook {
	t.Helper()
	c, err := Configuration()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range c.Webhooks {
		if s := w.ClientConfig.Service; s != nil && s.Path != nil && *s.Path == path {
			return w
		}
	}
	t.Fatalf("no webhook serves %s", path)
	return admissionregistrationv1.MutatingWebhook{}
}

// The finalizer webhook only ever helps: a FencedLease is created whether or not the
// operator answers (it adds the finalizer itself then), and only creations reach it, so
// the operator's removal of its finalizer at deletion is never undone.
func TestTheFinalizerWebhookFailsOpenAndSeesOnlyFencedLeaseCreations(t *testing.T) {
	w := webhookAt(t, finalizerwebhook.Path)
	if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore {
		t.Errorf("failurePolicy %q, want Ignore", ptr.Deref(w.FailurePolicy, ""))
	}
	if w.TimeoutSeconds == nil || *w.TimeoutSeconds > 3 {
		t.Errorf("timeoutSeconds %d (10 when unset): a hung operator would hold every FencedLease creation that long", ptr.Deref(w.TimeoutSeconds, 10))
	}
	if len(w.Rules) != 1 || !slices.Equal(w.Rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}) ||
		!slices.Equal(w.Rules[0].Resources, []string{"fencedleases"}) || !slices.Equal(w.Rules[0].APIGroups, []string{"fencing.fencedlease.io"}) {
		t.Errorf("rules %+v, want CREATE of fencing.fencedlease.io fencedleases only", w.Rules)
	}
}

// The pod webhook fails open: an operator outage must block no pod. A labeled pod still
// never starts ungated: the ValidatingAdmissionPolicy fencedlease-candidate-check refuses
// one nothing admitted (test/policy).
func TestThePodWebhookFailsOpen(t *testing.T) {
	w := webhookAt(t, podwebhook.Path)
	if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore {
		t.Errorf("failurePolicy %q, want Ignore", ptr.Deref(w.FailurePolicy, ""))
	}
}
