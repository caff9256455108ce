package bench

import (
	"context"
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// statusWatch follows every FencedLease from one watch, so waiting for the statuses to
// catch up with their Leases reads memory, not the API server. Listing 1,000 FencedLeases
// and 1,000 Leases every half second, as awaitStatus once did, loaded the server while a
// failover's follow-up writes landed: load on the operator's side of a scenario only
// (client-go's waits are watches).
type statusWatch struct {
	fls cache.Cache
}

func watchStatuses(ctx context.Context, cfg *rest.Config) (*statusWatch, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = "application/json" // a custom resource has no protobuf encoding
	c, err := cache.New(cfg, cache.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return nil, err
	}
	if _, err := c.GetInformer(ctx, &fencingv1.FencedLease{}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	c.WaitForCacheSync(ctx)
	return &statusWatch{fls: c}, nil
}

// behind counts the FencedLeases of want (keyed as keyed makes them) whose status does not
// show what their Lease (from leases) does.
func (s *statusWatch) behind(ctx context.Context, ns string, want map[string]string, leases *leaseWatch) (int, error) {
	var fls fencingv1.FencedLeaseList
	if err := s.fls.List(ctx, &fls, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	n := 0
	for i := range fls.Items {
		fl := &fls.Items[i]
		key := ns + "/" + fl.Name
		if _, ok := want[key]; ok && !statusShowsLease(fl, leases.lease(key)) {
			n++
		}
	}
	return n, nil
}

// statusShowsLease: fl's status names the holder and token lease names (or no holder).
func statusShowsLease(fl *fencingv1.FencedLease, lease *coordinationv1.Lease) bool {
	if lease == nil {
		return false
	}
	holder := ""
	if h := fl.Status.Holder; h != nil {
		holder = h.PodName
	}
	return holder == ptr.Deref(lease.Spec.HolderIdentity, "") &&
		strconv.FormatInt(fl.Status.FencingToken, 10) == lease.Annotations[fencingv1.TokenAnnotation]
}
