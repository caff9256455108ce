package podwebhook

import (
	"context"
	"encoding/json"
	"testing"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// A pod from an API server newer than our compiled types carries fields they lack. The
// webhook must add its own and leave every one of those alone, wherever they are: on the
// pod, in a container, and in an init container that the agent's insertion shifts.
const futurePod = `{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "p", "namespace": "ns", "labels": {"fencing.fencedlease.io/lease": "invoices"},
               "annotations": {"fencing.fencedlease.io/agent": "true"}, "futureMeta": "m"},
  "spec": {
    "futureSpec": {"x": 1},
    "initContainers": [{"name": "migrate", "image": "x", "futureContainerField": "i"}],
    "containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "1000m"}}, "futureContainerField": "c"}]
  }
}`

func TestHandlerPatchesOnlyWhatItAdds(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = fencingv1.AddToScheme(scheme)
	h, err := NewHandler(scheme, "agent:v1")
	if err != nil {
		t.Fatal(err)
	}
	resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: "ns", Object: runtime.RawExtension{Raw: []byte(futurePod)},
	}})
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	ops, err := json.Marshal(resp.Patches)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatchapply.DecodePatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := patch.Apply([]byte(futurePod))
	if err != nil {
		t.Fatalf("applying %s: %v", ops, err)
	}
	for _, op := range resp.Patches {
		if op.Operation == "remove" {
			t.Errorf("the patch removes %s", op.Path)
		}
	}

	var got map[string]any
	if err := json.Unmarshal(patched, &got); err != nil {
		t.Fatal(err)
	}
	spec := got["spec"].(map[string]any)
	inits := spec["initContainers"].([]any)
	for path, ok := range map[string]bool{
		"metadata.futureMeta":                       got["metadata"].(map[string]any)["futureMeta"] == "m",
		"spec.futureSpec":                           spec["futureSpec"] != nil,
		"spec.containers[0].futureContainerField":   spec["containers"].([]any)[0].(map[string]any)["futureContainerField"] == "c",
		"the agent first among the init containers": inits[0].(map[string]any)["name"] == fencingv1.AgentContainerName,
		"spec.initContainers[1] is migrate, unknown field and all": inits[1].(map[string]any)["name"] == "migrate" &&
			inits[1].(map[string]any)["futureContainerField"] == "i",
		"the request's own spelling of a quantity": spec["containers"].([]any)[0].(map[string]any)["resources"].(map[string]any)["requests"].(map[string]any)["cpu"] == "1000m",
	} {
		if !ok {
			t.Errorf("%s lost or wrong after the patch:\n%s", path, patched)
		}
	}

	// What our types see of the patched pod is exactly what Admit makes of the request.
	var seen, want corev1.Pod
	if err := json.Unmarshal(patched, &seen); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(futurePod), &want); err != nil {
		t.Fatal(err)
	}
	if err := Admit(&want, "agent:v1"); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(seen, want) {
		t.Fatalf("patched pod differs from Admit's:\n%s", patched)
	}
}
