package bench

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

// holders stands in for the pods the operator grants: as soon as a Lease names one of its
// pods, it holds the grant with pkg/holder, as a workload would. One process holds
// thousands of grants; it runs as its own API user.
type holders struct {
	ctx context.Context
	cs  kubernetes.Interface

	mu      sync.Mutex
	running map[string]*simHolder // by "ns/pod"
	// renewals counts confirmed renewals by namespace.
	renewals map[string]int
	// gaveUp records the holders that ended on their own deadline (ErrDeadline).
	gaveUp losses
}

type simHolder struct {
	started bool
	cancel  context.CancelFunc
	h       *holder.Holder
	// confirmed is when the grant was confirmed by the first renewal.
	confirmed time.Time
}

// newHolders returns the simulated holders; they start from the Leases saw is given.
func newHolders(ctx context.Context, cfg *rest.Config) *holders {
	h := &holders{ctx: ctx, running: map[string]*simHolder{}, renewals: map[string]int{}}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return renewalCounter{rt: rt, h: h} })
	h.cs = kubernetes.NewForConfigOrDie(cfg)
	return h
}

// enlist makes pod ns/name one of the simulated holders: it holds its grant once granted.
func (h *holders) enlist(ns, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.running[ns+"/"+name] = &simHolder{}
}

// stop makes the holder of ns/name stop renewing at once, without releasing: a crash.
func (h *holders) stop(ns, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.running[ns+"/"+name]; s != nil {
		delete(h.running, ns+"/"+name)
		if s.cancel != nil {
			s.cancel()
		}
	}
}

// release ends the grant of ns/name with pkg/holder's Release, and returns when it was
// called.
func (h *holders) release(ns, name string) (time.Time, error) {
	h.mu.Lock()
	s := h.running[ns+"/"+name]
	delete(h.running, ns+"/"+name)
	h.mu.Unlock()
	if s == nil || s.h == nil {
		return time.Time{}, errors.New("not holding: " + ns + "/" + name)
	}
	at := time.Now()
	err := s.h.Release(h.ctx)
	s.cancel()
	return at, err
}

// confirmedAt is when the grant of ns/name was confirmed; zero before.
func (h *holders) confirmedAt(ns, name string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.running[ns+"/"+name]; s != nil {
		return s.confirmed
	}
	return time.Time{}
}

// renewalsIn counts namespace ns's confirmed renewals.
func (h *holders) renewalsIn(ns string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renewals[ns]
}

func (h *holders) saw(l *coordinationv1.Lease) {
	if _, ours := l.Labels[fencingv1.LeaseLabel]; !ours || l.Spec.HolderIdentity == nil {
		return
	}
	token, err := strconv.ParseInt(l.Annotations[fencingv1.TokenAnnotation], 10, 64)
	if err != nil {
		return
	}
	ns, pod := l.Namespace, *l.Spec.HolderIdentity
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.running[ns+"/"+pod]
	if s == nil || s.started {
		return
	}
	s.started = true
	ctx, cancel := context.WithCancel(h.ctx)
	s.cancel = cancel
	go func() {
		hd, err := holder.Start(ctx, holder.Config{
			Leases: holder.ClientGo(h.cs.CoordinationV1()), Namespace: ns, LeaseName: l.Name, Identity: pod, Token: token,
			Callbacks: holder.Callbacks{OnLost: func(reason error) {
				if errors.Is(reason, holder.ErrDeadline) {
					h.gaveUp.add(ns, time.Now())
				}
			}},
		})
		if err != nil {
			return // revoked before it could confirm, or stopped
		}
		h.mu.Lock()
		s.h, s.confirmed = hd, time.Now()
		h.mu.Unlock()
	}()
}

// renewalCounter counts the holders' successful Lease updates by namespace.
type renewalCounter struct {
	rt http.RoundTripper
	h  *holders
}

func (c renewalCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err == nil && r.Method == http.MethodPut && resp.StatusCode == http.StatusOK {
		// /apis/coordination.k8s.io/v1/namespaces/<ns>/leases/<name>
		if parts := strings.Split(r.URL.Path, "/"); len(parts) == 8 && parts[6] == "leases" {
			c.h.mu.Lock()
			c.h.renewals[parts[5]]++
			c.h.mu.Unlock()
		}
	}
	return resp, err
}
