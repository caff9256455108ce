package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/fencedlease/fencedlease/controllers/leadership"
)

// leaderOptions are the leader-election timings. The defaults suit this operator: a
// failover delays every holder's revocation by up to its lease (each holder gets a full
// duration from the new leader's first look), so the standby should take over soon after
// the leader is gone — lease 10 s, retry 1 s: within 11 s of the last renewal — and the
// leader should ride out a short API-server outage — renew deadline 7 s, six missed
// one-second renewals. The 3 s between renew deadline and lease is the margin by which
// the leader stops writing (see controllers/leadership) before a standby may start.
type leaderOptions struct {
	enabled                      bool
	namespace                    string
	leaseDuration, renewDeadline time.Duration
	retryPeriod                  time.Duration
}

func (o *leaderOptions) bind(fs *flag.FlagSet) {
	fs.BoolVar(&o.enabled, "leader-elect", true, "Elect a leader, so several replicas can run and only one acts.")
	fs.StringVar(&o.namespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the pod's own).")
	fs.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 10*time.Second,
		"How long a standby waits after the leader's last observed renewal before it takes over.")
	fs.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 7*time.Second,
		"How long after its last confirmed renewal was sent the leader stops acting and gives up leadership. Must be below the lease duration.")
	fs.DurationVar(&o.retryPeriod, "leader-election-retry-period", time.Second,
		"How often the leader renews and a standby tries to acquire.")
}

func (o *leaderOptions) validate() error {
	if o.retryPeriod <= 0 || o.renewDeadline <= o.retryPeriod || o.leaseDuration <= o.renewDeadline {
		return fmt.Errorf("leader election needs 0 < retry period (%v) < renew deadline (%v) < lease duration (%v)",
			o.retryPeriod, o.renewDeadline, o.leaseDuration)
	}
	return nil
}

// leaderLock builds the leader-election Lease lock wrapped by a Guard that fences the
// operator's writes to the time its leadership is certain.
func leaderLock(cfg *rest.Config, o leaderOptions, reg prometheus.Registerer) (resourcelock.Interface, *leadership.Guard, error) {
	ns := o.namespace
	if ns == "" {
		raw, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		if err != nil {
			return nil, nil, errors.New("not running in a cluster: set --leader-election-namespace, or --leader-elect=false")
		}
		ns = strings.TrimSpace(string(raw))
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, nil, err
	}
	return leadership.NewLock(cfg, ns, "fencedlease-operator", host+"_"+string(uuid.NewUUID()), o.renewDeadline, reg)
}
