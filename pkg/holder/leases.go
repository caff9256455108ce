package holder

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// LeaseClient is all a holder asks of the API server: read its Lease, update it, and —
// while a warm standby waits for its grant — watch it.
type LeaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// LeaseClients gives the LeaseClient of a namespace.
type LeaseClients interface {
	Leases(namespace string) LeaseClient
}

// ClientGo adapts client-go's typed client, ClientGo(clientset.CoordinationV1()). This
// package does not import that client itself: it links every built-in API type into
// the binary (16 MB), which the small agent binary does without.
func ClientGo[L LeaseClient](typed interface{ Leases(namespace string) L }) LeaseClients {
	return clientGo[L]{typed}
}

type clientGo[L LeaseClient] struct {
	typed interface{ Leases(namespace string) L }
}

func (c clientGo[L]) Leases(namespace string) LeaseClient { return c.typed.Leases(namespace) }
