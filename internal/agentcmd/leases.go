package agentcmd

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/fencedlease/fencedlease/pkg/holder"
)

// leaseScheme knows Leases and nothing else: client-go's typed client would register
// every built-in type, two thirds of this binary.
var leaseScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(coordinationv1.AddToScheme(s))
	return s
}()

// restLeases is a holder.LeaseClients over a REST client for coordination.k8s.io/v1.
type restLeases struct{ rest rest.Interface }

func newRESTLeases(cfg *rest.Config) (holder.LeaseClients, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &coordinationv1.SchemeGroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(leaseScheme).WithoutConversion()
	c, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return restLeases{c}, nil
}

func (r restLeases) Leases(namespace string) holder.LeaseClient {
	return namespaced{r.rest, namespace}
}

type namespaced struct {
	rest rest.Interface
	ns   string
}

var parameters = runtime.NewParameterCodec(leaseScheme)

func (n namespaced) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := n.rest.Get().Namespace(n.ns).Resource("leases").Name(name).
		VersionedParams(&opts, parameters).Do(ctx).Into(out)
	return out, err
}

func (n namespaced) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := n.rest.Put().Namespace(n.ns).Resource("leases").Name(lease.Name).
		VersionedParams(&opts, parameters).Body(lease).Do(ctx).Into(out)
	return out, err
}

func (n namespaced) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return n.rest.Get().Namespace(n.ns).Resource("leases").
		VersionedParams(&opts, parameters).Watch(ctx)
}
