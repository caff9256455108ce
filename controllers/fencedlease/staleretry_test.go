package fencedlease

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// notFoundStatus refuses every status write with NotFound: an object the operator keeps
// writing to that the API server keeps saying is gone.
type notFoundStatus struct{ client.Client }

func (n notFoundStatus) Status() client.SubResourceWriter {
	return notFoundStatusWriter{n.Client.Status()}
}

type notFoundStatusWriter struct{ client.SubResourceWriter }

func (notFoundStatusWriter) Update(_ context.Context, obj client.Object, _ ...client.SubResourceUpdateOption) error {
	return apierrors.NewNotFound(schema.GroupResource{Group: fencingv1.GroupVersion.Group, Resource: "fencedleases"}, obj.GetName())
}

// A stale read is retried soon, ten times, then one that persists is retried each
// maxRetryDelay:
// before, every retry came 20 ms later, a persistent NotFound spun at 50 Hz. A pass that
// ends otherwise starts the back-off over.
func TestAPersistentStaleReadBacksOff(t *testing.T) {
	f := newCASFixture(t)
	f.r.staleRetries = newStaleRetries()
	healthy := f.r.Client
	f.clock.Step(11 * time.Second)
	f.reconcile(t) // a expired: handed over to b on the Lease; the status waits
	f.clock.Step(decision.StatusCoalesce)
	f.r.Client = notFoundStatus{healthy} // every status write from now on fails
	var got []time.Duration
	for range 13 {
		got = append(got, f.reconcileFor(t).RequeueAfter)
	}
	want := []time.Duration{20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 1000, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("retries after a persistent NotFound: %v, want %v ms", got, want)
		}
	}

	f.r.Client = healthy
	f.reconcile(t) // the status lands: the back-off starts over
	if name, token, _ := f.holder(t); name != "b" || token != 2 {
		t.Fatalf("holder %s token %d after the status landed, want b token 2", name, token)
	}
	f.r.Client = notFoundStatus{healthy}
	f.edit(t, func(fl *fencingv1.FencedLease) { fl.Annotations = map[string]string{fencingv1.RevokeAnnotation: "2"} }, false)
	f.clock.Step(time.Second)
	if after := f.reconcileFor(t).RequeueAfter; after != decision.ConflictRetry {
		t.Fatalf("the first retry after a pass that went through: %v, want %v", after, decision.ConflictRetry)
	}
}
