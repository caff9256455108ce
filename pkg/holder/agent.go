package holder

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// RunAgent is the renewal sidecar's loop, for workloads that do not link this package:
// it holds the grant until ctx ends (the pod stops). When the grant is lost it logs why
// and waits, rather than exiting: a restarted sidecar could not win the grant back, and
// the workload sees the loss in /etc/fencing/state. A hand-off request is logged and
// passed on by /etc/fencing/state showing Draining; the agent keeps renewing, because it
// cannot know when the workload reached a safe point. The workload releases itself (it
// may clear holderIdentity on its own Lease), or is revoked after the grace period.
func RunAgent(ctx context.Context, cfg Config, log logr.Logger) error {
	cfg.OnDraining = func(successor string) {
		log.Info("asked to hand off to a newer revision; the workload should release at a safe point",
			"lease", cfg.LeaseName, "token", cfg.Token, "successor", successor)
	}
	retry := time.Second
	c := cfg.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	for {
		h, err := Start(ctx, cfg)
		if err == nil {
			log.Info("holding grant", "lease", cfg.LeaseName, "token", cfg.Token)
			<-h.Context().Done()
			if ctx.Err() != nil {
				return nil // the pod is stopping: leave the grant to expire or be released
			}
			log.Info("grant ended; renewals stopped", "reason", h.Err().Error())
			<-ctx.Done()
			return nil
		}
		if errors.Is(err, ErrRevoked) {
			log.Info("not the holder of this grant; nothing to renew", "reason", err.Error())
			<-ctx.Done()
			return nil
		}
		log.Error(err, "confirming the grant; retrying", "in", retry)
		select {
		case <-ctx.Done():
			return nil
		case <-c.After(retry):
		}
	}
}
