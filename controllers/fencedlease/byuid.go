package fencedlease

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// readByUID reads object (name, uid) into obj uncached; nil when it is gone or another
// object now has its name.
func readByUID[T client.Object](ctx context.Context, reader client.Reader, obj T, ns, name string, uid types.UID) (T, error) {
	var none T
	switch err := reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj); {
	case apierrors.IsNotFound(err):
		return none, nil
	case err != nil:
		return none, fmt.Errorf("reading %T %s: %w", obj, name, err)
	case obj.GetUID() != uid:
		return none, nil
	}
	return obj, nil
}

// podWithUID reads, uncached, the pod of namespace ns with uid, whatever its labels: the
// pod of a grant only a Lease records, which released it there (its name went with
// holderIdentity) and is not among the labeled pods — gone, or its label taken off. A
// list of the namespace's pods, made only then. nil when there is none.
func podWithUID(ctx context.Context, reader client.Reader, ns string, uid types.UID) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := reader.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return decision.FindPod(pods.Items, uid), nil
}
