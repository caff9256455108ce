package holder

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// Why a holder's context ends (see Err).
var (
	// ErrRevoked: the Lease no longer names this pod with this token.
	ErrRevoked = errors.New("grant revoked: the Lease no longer names this holder and token")
	// ErrDeadline: no renewal was confirmed within RenewDeadline.
	ErrDeadline = errors.New("grant lost: no renewal confirmed before the renew deadline")
	// ErrReleased: Release was called.
	ErrReleased = errors.New("grant released")
)

// Config says which grant to hold and how.
type Config struct {
	// Leases reaches the API server: ClientGo(clientset.CoordinationV1()).
	Leases LeaseClients
	// Namespace, LeaseName (the FencedLease's name), Identity (the pod name) and Token
	// name the grant; FromEnv reads them from the variables the operator injects.
	Namespace string
	LeaseName string
	Identity  string
	Token     int64
	// UID is the pod's UID (FENCING_HOLDER_UID), optional: with it StartWhenGranted takes
	// only a grant of this very pod, never one of an earlier pod of the same name.
	UID types.UID
	// Sharded says the grant is a slot's, in a FencedLease with slots (FENCING_SLOT is
	// set, or the Lease granted is a slot's): each slot has its own Lease. Slot is the
	// slot granted (FENCING_SLOT); StartWhenGranted sets both from the Lease it is
	// granted on, and waits on every slot's Lease whatever they say.
	Sharded bool
	Slot    int32
	// RenewInterval is how often to renew; default a third of the lease duration. Each
	// renewal comes up to 10 % early, at random, so holders granted together spread out.
	RenewInterval time.Duration
	// RenewDeadline is how long after the last confirmed renewal was sent the holder
	// gives up; default the lease duration less DriftMargin. It must be shorter than it.
	RenewDeadline time.Duration
	// DriftMargin is how much earlier than the operator could the holder gives up, for the
	// two clocks' rates to differ and for the workload to stop once told; default 5 % of
	// the lease duration and at least 500 ms. Ignored when RenewDeadline is set.
	DriftMargin time.Duration
	// StopGrace is how long a supervised workload gets between SIGTERM and SIGKILL (see
	// Exec): the default RenewDeadline is that much earlier, so the workload is killed
	// before the operator may grant anyone else. Zero for a workload in this process.
	StopGrace time.Duration
	// RetryPeriod is the wait between failed attempts; default RenewInterval/4.
	RetryPeriod time.Duration
	// Callbacks are told what happens to the grant; each may be nil.
	Callbacks Callbacks
	// StartTimeout bounds Start's first read of the Lease, before the lease duration is
	// known; default 10 s. The first renewal is bounded by RenewDeadline, as every one is.
	StartTimeout time.Duration
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Metrics, from NewMetrics, counts renewals and losses; nil counts nothing.
	Metrics *Metrics
}

// Callbacks are told what happens to a grant. OnRenewed and OnDraining run on the
// renewal goroutine and must not block; OnLost runs once, on whichever goroutine ended
// the grant.
type Callbacks struct {
	// OnLost is called once, with the reason (Err's), when the grant ends for any reason.
	OnLost func(error)
	// OnRenewed is called after every confirmed renewal (the first, in Start, too) with
	// the new local deadline: the moment this holder gives up unless another renewal is
	// confirmed (Deadline).
	OnRenewed func(deadline time.Time)
	// OnDraining is called once, with the successor pod's name, when the operator asks
	// this holder to hand off (see Draining).
	OnDraining func(successor string)
}

// FromEnv fills the grant's names from FENCING_LEASE_NAMESPACE, FENCING_LEASE_NAME,
// FENCING_HOLDER_IDENTITY, FENCING_HOLDER_UID and FENCING_TOKEN: the environment of a
// Cold candidate, which starts only once granted. A Warm one's FENCING_TOKEN is empty: use
// NamesFromEnv and StartWhenGranted.
func (c Config) FromEnv() (Config, error) {
	c, err := c.NamesFromEnv()
	if err != nil {
		return c, err
	}
	raw := os.Getenv(fencingv1.EnvToken)
	t, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || t < 1 {
		return c, fmt.Errorf("%s=%q is not a granted token: is this pod opted in and granted? (a Warm standby waits for its token with StartWhenGranted)",
			fencingv1.EnvToken, raw)
	}
	c.Token = t
	if raw := os.Getenv(fencingv1.EnvSlot); raw != "" {
		// The slot annotation the operator wrote with the token: set only in a
		// FencedLease with slots.
		s, err := strconv.ParseInt(raw, 10, 32)
		if err != nil || s < 0 {
			return c, fmt.Errorf("%s=%q is not a granted slot", fencingv1.EnvSlot, raw)
		}
		c.Slot, c.Sharded = int32(s), true
	}
	return c, nil
}

// Lease is the name of the grant's Lease: the FencedLease's own, or its slot's
// (fencingv1.SlotLeaseName).
func (c Config) Lease() string {
	return fencingv1.SlotLeaseName(c.LeaseName, c.Slot)
}

// NamesFromEnv fills what names the grant but the token — FENCING_LEASE_NAMESPACE,
// FENCING_LEASE_NAME, FENCING_HOLDER_IDENTITY and, when set, FENCING_HOLDER_UID — for
// StartWhenGranted in a pod that runs before it is granted.
func (c Config) NamesFromEnv() (Config, error) {
	c.Namespace = os.Getenv(fencingv1.EnvLeaseNamespace)
	c.LeaseName = os.Getenv(fencingv1.EnvLeaseName)
	c.Identity = os.Getenv(fencingv1.EnvHolderIdentity)
	c.UID = types.UID(os.Getenv(fencingv1.EnvHolderUID))
	c.Sharded = os.Getenv(fencingv1.EnvSlot) != "" // "" until granted, and without slots
	for _, name := range []string{fencingv1.EnvLeaseNamespace, fencingv1.EnvLeaseName, fencingv1.EnvHolderIdentity} {
		if os.Getenv(name) == "" {
			return c, fmt.Errorf("%s is not set: is this pod opted in?", name)
		}
	}
	return c, nil
}

// Holder renews one grant in the background.
type Holder struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}
	lost   sync.Once
	// draining is closed when the operator asks for a hand-off.
	draining  chan struct{}
	drainOnce sync.Once
	// lease is the Lease as the last renewal left it (nil: read it first); only the
	// renewing goroutine touches it.
	lease *coordinationv1.Lease

	mu sync.Mutex
	// deadline is when the last confirmed renewal's authority ends, on this clock.
	deadline time.Time
}

// Start confirms the grant with a first renewal, then renews in the background until
// the grant is lost, released, or ctx ends. A grant that cannot be confirmed is an error.
// It returns within StartTimeout (the first read) plus RenewDeadline (the first renewal):
// a renewal confirmed later than that would confer no authority anyway.
func Start(ctx context.Context, cfg Config) (*Holder, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = defaultStartTimeout
	}
	read, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	lease, err := cfg.Leases.Leases(cfg.Namespace).Get(read, cfg.Lease(), metav1.GetOptions{})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("reading Lease %s/%s: %w", cfg.Namespace, cfg.Lease(), err)
	}
	return start(ctx, cfg, lease)
}

// start is Start from a Lease already read: the first renewal builds on it.
func start(ctx context.Context, cfg Config, lease *coordinationv1.Lease) (*Holder, error) {
	if err := cfg.defaults(lease); err != nil {
		return nil, err
	}
	cfg.Metrics.start(&cfg)
	h := &Holder{cfg: cfg, done: make(chan struct{}), draining: make(chan struct{}), lease: lease}
	h.ctx, h.cancel = context.WithCancelCause(ctx)
	first, cancel := context.WithTimeout(ctx, cfg.RenewDeadline)
	sent, err := h.renew(first)
	cancel()
	if err != nil {
		h.cancel(err)
		return nil, err
	}
	h.renewed(sent)
	go h.loop(sent)
	return h, nil
}

// defaultStartTimeout bounds the first read of the Lease.
const defaultStartTimeout = 10 * time.Second

func (c *Config) defaults(lease *coordinationv1.Lease) error {
	if lease.Spec.LeaseDurationSeconds == nil || *lease.Spec.LeaseDurationSeconds < 1 {
		return fmt.Errorf("the Lease %s/%s has no leaseDurationSeconds: not written by the operator", c.Namespace, c.Lease())
	}
	d := time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	if c.RenewInterval == 0 {
		c.RenewInterval = d / 3
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = d - c.margin(d) - c.StopGrace
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = c.RenewInterval / 4
	}
	if c.RenewDeadline+c.StopGrace >= d || c.RenewInterval >= c.RenewDeadline {
		return fmt.Errorf("need RenewInterval (%v) < RenewDeadline (%v), and RenewDeadline + StopGrace (%v) < lease duration (%v)",
			c.RenewInterval, c.RenewDeadline, c.StopGrace, d)
	}
	return nil
}

// Context is cancelled when the grant ends; Err says why.
func (h *Holder) Context() context.Context { return h.ctx }

// Err is why Context ended (ErrRevoked, ErrDeadline, ErrReleased, or the parent's
// error), or nil while the grant holds.
func (h *Holder) Err() error { return context.Cause(h.ctx) }

// Draining is closed when the operator asks this holder to hand off: a newer revision
// of its own workload is waiting. The grant still holds; finish or checkpoint the work
// in hand, then call Release, before the FencedLease's handoffGracePeriodSeconds end.
// After that the operator refuses further renewals and revokes the grant when its lease
// runs out (Context then ends with ErrRevoked or ErrDeadline). A request is never
// withdrawn.
func (h *Holder) Draining() <-chan struct{} { return h.draining }

// Slot is the slot of the grant, in a FencedLease with slots (0 otherwise): a resource
// fenced per shard keys its highest token by it.
func (h *Holder) Slot() int32 { return h.cfg.Slot }

// Token is the fencing token to pass with every protected write.
func (h *Holder) Token() int64 { return h.cfg.Token }

// Deadline is when this holder gives up unless another renewal is confirmed: RenewDeadline
// after the last confirmed renewal was sent, on the holder's clock. Start no work that
// cannot finish before it.
func (h *Holder) Deadline() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deadline
}

// Holding reports, now, whether the grant holds: not ended, and its Deadline not passed.
// It reads the clock itself, so it is true only while the last confirmed renewal still
// confers authority, even before the renewal goroutine notices a missed deadline.
func (h *Holder) Holding() bool {
	now := h.cfg.Clock.Now()
	return h.ctx.Err() == nil && now.Before(h.Deadline())
}

// Release stops the work (Context ends with ErrReleased) and clears the Lease's holder,
// so the operator grants the next pod at once. It is a no-op on a Lease that no longer
// names this holder.
func (h *Holder) Release(ctx context.Context) error {
	h.end(ErrReleased)
	<-h.done
	leases := h.cfg.Leases.Leases(h.cfg.Namespace)
	for attempt := 0; ; attempt++ {
		lease, err := leases.Get(ctx, h.cfg.Lease(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !h.named(lease) {
			return nil
		}
		leaserecord.Release(lease)
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		// A renewal cancelled by end may still have landed after the read: read again.
		if !apierrors.IsConflict(err) || attempt == releaseAttempts-1 {
			return err
		}
	}
}

// releaseAttempts bounds Release's retries on a conflict; only the holder's own last
// renewal and the operator write this Lease, so a few are plenty.
// margin is DriftMargin, or its default for lease duration d.
func (c *Config) margin(d time.Duration) time.Duration {
	if c.DriftMargin > 0 {
		return c.DriftMargin
	}
	return max(d/20, minDriftMargin)
}

// minDriftMargin leaves a workload half a second to stop after its context ends.
const minDriftMargin = 500 * time.Millisecond

const releaseAttempts = 5

func (h *Holder) renewed(sent time.Time) {
	deadline := sent.Add(h.cfg.RenewDeadline)
	h.mu.Lock()
	h.deadline = deadline
	h.mu.Unlock()
	if h.cfg.Callbacks.OnRenewed != nil {
		h.cfg.Callbacks.OnRenewed(deadline)
	}
}

// loop renews every RenewInterval and gives up at RenewDeadline after the last
// confirmed renewal was sent.
func (h *Holder) loop(sent time.Time) {
	defer close(h.done)
	c := h.cfg.Clock
	for {
		deadline := sent.Add(h.cfg.RenewDeadline)
		if !h.sleep(jittered(h.cfg.RenewInterval) - c.Since(sent)) {
			return
		}
		for {
			left := deadline.Sub(c.Now())
			if left <= 0 {
				h.end(ErrDeadline)
				return
			}
			attempt, cancel := context.WithTimeout(h.ctx, left)
			s, err := h.renew(attempt)
			cancel()
			h.cfg.Metrics.renewed(&h.cfg, err)
			if err == nil {
				sent = s
				h.renewed(sent)
				break
			}
			if errors.Is(err, ErrRevoked) {
				h.end(err)
				return
			}
			if !h.sleep(min(h.cfg.RetryPeriod, deadline.Sub(c.Now()))) {
				return
			}
		}
	}
}

// renewJitter is the share of the renew interval a renewal may come early by, at random:
// holders granted together (a mass failover) would otherwise renew in step, in bursts on
// the API server, for as long as they hold. Early only, never late: RenewInterval stays a
// bound.
const renewJitter = 0.1

// jittered is interval less a random share of it, up to renewJitter.
func jittered(interval time.Duration) time.Duration {
	if span := time.Duration(float64(interval) * renewJitter); span > 0 {
		return interval - rand.N(span)
	}
	return interval
}

// sleep waits d on the injected clock; false when the grant ended meanwhile.
func (h *Holder) sleep(d time.Duration) bool {
	t := h.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-h.ctx.Done():
		h.end(context.Cause(h.ctx))
		return false
	case <-t.C():
		return true
	}
}

// renew writes a new renewTime if the Lease still names this holder and token, and
// returns when the write was sent. It builds on the Lease its last write returned, so a
// renewal is one request; only a conflict (someone else wrote) costs a fresh read.
func (h *Holder) renew(ctx context.Context) (time.Time, error) {
	leases := h.cfg.Leases.Leases(h.cfg.Namespace)
	for attempt := 0; ; attempt++ {
		if h.lease == nil {
			lease, err := leases.Get(ctx, h.cfg.Lease(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return time.Time{}, ErrRevoked
			}
			if err != nil {
				return time.Time{}, err
			}
			h.lease = lease
		}
		if !h.named(h.lease) {
			return time.Time{}, ErrRevoked
		}
		sent := h.cfg.Clock.Now()
		next := h.lease.DeepCopy()
		leaserecord.Renew(next, sent)
		updated, err := leases.Update(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			h.lease = updated
			if successor := leaserecord.Read(updated).Successor; successor != "" {
				h.drain(successor)
			}
			return sent, nil
		}
		h.lease = nil
		if !apierrors.IsConflict(err) || attempt > 0 {
			return time.Time{}, err
		}
	}
}

// named: Lease l names this holder and its token (R1).
func (h *Holder) named(l *coordinationv1.Lease) bool {
	return leaserecord.Read(l).Names(h.cfg.Identity, h.cfg.Token)
}

// drain signals the hand-off request, once.
func (h *Holder) drain(successor string) {
	h.drainOnce.Do(func() {
		close(h.draining)
		if h.cfg.Callbacks.OnDraining != nil {
			h.cfg.Callbacks.OnDraining(successor)
		}
	})
}

// end cancels the context with reason and calls OnLost, once.
func (h *Holder) end(reason error) {
	h.lost.Do(func() {
		h.cancel(reason)
		h.cfg.Metrics.lostFor(&h.cfg, reason)
		if h.cfg.Callbacks.OnLost != nil {
			h.cfg.Callbacks.OnLost(reason)
		}
	})
}
