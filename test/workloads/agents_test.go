package workloads

import (
	"context"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// agents plays the renewal agent of every holder pod whose node is alive: a holder on a
// dead node cannot reach the API server.
type agents struct {
	ns     string
	lease  string // the FencedLease whose holders it renews
	mu     sync.Mutex
	paused bool // a holder that never renews: its process is stuck, or never started
	dead   map[string]bool
	last   map[string]time.Time // pod → when its last renewal was sent
}

func (a *agents) run(ctx context.Context) {
	defer GinkgoRecover()
	for ctx.Err() == nil {
		a.renewOnce(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (a *agents) renewOnce(ctx context.Context) {
	fl := &fencingv1.FencedLease{}
	if k8s.Get(ctx, client.ObjectKey{Namespace: a.ns, Name: a.lease}, fl) != nil {
		return
	}
	if h := fl.Status.Holder; h != nil {
		a.renew(ctx, h, a.lease)
	}
	for _, s := range fl.Status.Slots {
		if s.Holder != nil {
			a.renew(ctx, s.Holder, fencingv1.SlotLeaseName(a.lease, s.Slot))
		}
	}
}

// renew renews grant h on Lease lease, as its pod's agent would: only while the pod
// runs on a live node and the Lease names it with its token.
func (a *agents) renew(ctx context.Context, h *fencingv1.Holder, lease string) {
	p := &corev1.Pod{}
	if k8s.Get(ctx, client.ObjectKey{Namespace: a.ns, Name: h.PodName}, p) != nil || p.Status.Phase != corev1.PodRunning {
		return
	}
	a.mu.Lock()
	dead := a.dead[p.Spec.NodeName] || a.paused
	a.mu.Unlock()
	l := &coordinationv1.Lease{}
	if dead || k8s.Get(ctx, client.ObjectKey{Namespace: a.ns, Name: lease}, l) != nil ||
		ptr.Deref(l.Spec.HolderIdentity, "") != p.Name || l.Annotations[fencingv1.TokenAnnotation] != strconv.FormatInt(h.Token, 10) {
		return
	}
	sent := time.Now()
	l.Spec.RenewTime = &metav1.MicroTime{Time: sent}
	if k8s.Update(ctx, l) == nil {
		a.mu.Lock()
		a.last[p.Name] = sent
		a.mu.Unlock()
	}
}

func (a *agents) pause(paused bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.paused = paused
}

func (a *agents) kill(node string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dead[node] = true
}

func (a *agents) lastRenewal(pod string) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last[pod]
}

// startAgents runs the agents of ns's FencedLease "invoices" until the spec ends.
func startAgents(ns string) *agents { return startAgentsFor(ns, "invoices") }

// startAgentsFor runs the agents of ns's FencedLease lease until the spec ends.
func startAgentsFor(ns, lease string) *agents {
	a := &agents{ns: ns, lease: lease, dead: map[string]bool{}, last: map[string]time.Time{}}
	agentCtx, stop := context.WithCancel(ctx)
	DeferCleanup(stop)
	go a.run(agentCtx)
	return a
}
