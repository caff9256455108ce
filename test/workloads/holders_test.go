package workloads

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

// holders runs a pkg/holder Holder for every granted pod that runs, as the workload's
// own process would: it confirms the grant, renews, and (when handOff is set) releases
// as soon as it is asked to hand off.
type holders struct {
	ns      string
	handOff bool
	cs      *kubernetes.Clientset

	mu      sync.Mutex
	started map[int64]bool // by token
	drained map[string]drained
	lost    map[string]time.Time // pod → when its Holder's context ended
}

// drained is what a holder saw when it was asked to hand off.
type drained struct {
	at        time.Time
	successor string
	podState  string // the state annotation its pod showed then (its /etc/fencing/state)
}

// startHolders runs the holders of ns's FencedLease "invoices" until the spec ends.
func startHolders(ns string, handOff bool) *holders {
	GinkgoHelper()
	hs := &holders{ns: ns, handOff: handOff, cs: kubernetes.NewForConfigOrDie(cl.Config),
		started: map[int64]bool{}, drained: map[string]drained{}, lost: map[string]time.Time{}}
	hctx, stop := context.WithCancel(ctx)
	DeferCleanup(stop)
	go hs.run(hctx)
	return hs
}

func (hs *holders) run(ctx context.Context) {
	defer GinkgoRecover()
	for ctx.Err() == nil {
		hs.startGranted(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startGranted starts a Holder for the current grant once its pod runs.
func (hs *holders) startGranted(ctx context.Context) {
	fl := &fencingv1.FencedLease{}
	if k8s.Get(ctx, client.ObjectKey{Namespace: hs.ns, Name: "invoices"}, fl) != nil || fl.Status.Holder == nil {
		return
	}
	g := fl.Status.Holder
	p := &corev1.Pod{}
	if k8s.Get(ctx, client.ObjectKey{Namespace: hs.ns, Name: g.PodName}, p) != nil || p.UID != g.PodUID || p.Status.Phase != corev1.PodRunning {
		return
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.started[g.Token] {
		return
	}
	hs.started[g.Token] = true
	go hs.hold(ctx, p.Name, g.Token)
}

func (hs *holders) hold(ctx context.Context, pod string, token int64) {
	defer GinkgoRecover()
	successor := make(chan string, 1)
	h, err := holder.Start(ctx, holder.Config{
		Leases: holder.ClientGo(hs.cs.CoordinationV1()), Namespace: hs.ns, LeaseName: "invoices", Identity: pod, Token: token,
		Callbacks: holder.Callbacks{OnDraining: func(s string) { successor <- s }},
	})
	if err != nil {
		GinkgoWriter.Printf("holder %s token %d not confirmed: %v\n", pod, token, err)
		return
	}
	select {
	case <-h.Context().Done():
	case <-h.Draining():
		hs.sawDrain(ctx, pod, <-successor)
		if hs.handOff {
			if err := h.Release(ctx); err != nil {
				GinkgoWriter.Printf("holder %s: release: %v\n", pod, err)
			}
		}
		<-h.Context().Done()
	}
	hs.mu.Lock()
	hs.lost[pod] = time.Now()
	hs.mu.Unlock()
	GinkgoWriter.Printf("holder %s token %d ended: %v\n", pod, token, h.Err())
}

// sawDrain records the request with the state the pod shows, waiting briefly for the
// operator's pod write, which follows its Lease write.
func (hs *holders) sawDrain(ctx context.Context, pod, successor string) {
	d := drained{at: time.Now(), successor: successor}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		p := &corev1.Pod{}
		if k8s.Get(ctx, client.ObjectKey{Namespace: hs.ns, Name: pod}, p) == nil {
			d.podState = p.Annotations[fencingv1.StateAnnotation]
			if d.podState == string(fencingv1.PodDraining) {
				break
			}
		}
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.drained[pod] = d
}

func (hs *holders) drainedOf(pod string) (drained, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	d, ok := hs.drained[pod]
	return d, ok
}

func (hs *holders) lostAt(pod string) time.Time {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.lost[pod]
}
