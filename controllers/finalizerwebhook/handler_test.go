package finalizerwebhook

import (
	"context"
	"encoding/json"
	"testing"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

func request(t *testing.T, op admissionv1.Operation, finalizers ...string) admission.Request {
	t.Helper()
	fl := &fencingv1.FencedLease{
		TypeMeta:   metav1.TypeMeta{APIVersion: fencingv1.GroupVersion.String(), Kind: "FencedLease"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "invoices", Finalizers: finalizers},
	}
	raw, err := json.Marshal(fl)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Object: runtime.RawExtension{Raw: raw}}}
}

func TestACreationGetsTheFinalizerAfterTheCreatorsOwn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		given []string
		want  []jsonpatch.Operation
	}{
		{name: "none", want: []jsonpatch.Operation{{Operation: "add", Path: "/metadata/finalizers", Value: []any{fencingv1.Finalizer}}}},
		{name: "the creator's own", given: []string{"example.com/keep"},
			want: []jsonpatch.Operation{{Operation: "add", Path: "/metadata/finalizers/1", Value: fencingv1.Finalizer}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := Handler{}.Handle(context.Background(), request(t, admissionv1.Create, tc.given...))
			if !resp.Allowed {
				t.Fatalf("refused: %v", resp.Result)
			}
			got, _ := json.Marshal(resp.Patches)
			want, _ := json.Marshal(tc.want)
			if string(got) != string(want) {
				t.Fatalf("patch %s, want %s", got, want)
			}
		})
	}
}

func TestNeverTwiceAndNeverOnAnUpdate(t *testing.T) {
	for name, req := range map[string]admission.Request{
		"a creation that has it": request(t, admissionv1.Create, fencingv1.Finalizer),
		// The operator drops it once a deleted FencedLease's holder is revoked; an update
		// without it must stay so.
		"an update without it": request(t, admissionv1.Update),
	} {
		resp := Handler{}.Handle(context.Background(), req)
		if !resp.Allowed || len(resp.Patches) > 0 {
			t.Errorf("%s: allowed %v, patches %v; want allowed, no patch", name, resp.Allowed, resp.Patches)
		}
	}
}

func TestAnUndecodableObjectIsAnErrorNotAPatch(t *testing.T) {
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte("{")}}}
	if resp := (Handler{}).Handle(context.Background(), req); resp.Allowed || resp.Result.Code != 400 {
		t.Fatalf("allowed %v, code %d; want a 400", resp.Allowed, resp.Result.Code)
	}
}
