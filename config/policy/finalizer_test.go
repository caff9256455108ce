package policy

import (
	"strings"
	"testing"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// The finalizer policy and AwaitFinalizer name the finalizer the operator removes.
func TestTheFinalizerPolicyAddsTheOperatorsFinalizer(t *testing.T) {
	if finalizer != fencingv1.Finalizer {
		t.Fatalf("AwaitFinalizer waits for %q, the operator's finalizer is %q", finalizer, fencingv1.Finalizer)
	}
	raw, err := files.ReadFile("fencedlease_finalizer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), `"`+fencingv1.Finalizer+`"`); n != 3 {
		t.Fatalf("fencedlease_finalizer.yaml names %q %d times, want 3 (the condition and both patches)", fencingv1.Finalizer, n)
	}
}
