package leadership

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// NewLock builds the leader-election Lease lock ns/name for identity, wrapped by a Guard
// that fences the operator's writes to the time its leadership is certain. The lock's
// requests time out at half the renew deadline (at least a second), so a hung request
// cannot eat the whole deadline. reg may be nil.
func NewLock(cfg *rest.Config, ns, name, identity string, renewDeadline time.Duration, reg prometheus.Registerer) (resourcelock.Interface, *Guard, error) {
	lcfg := rest.CopyConfig(cfg)
	lcfg.UserAgent = "fencedlease/leader-election"
	lcfg.Timeout = max(renewDeadline/2, time.Second)
	cs, err := kubernetes.NewForConfig(lcfg)
	if err != nil {
		return nil, nil, err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, name, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		return nil, nil, err
	}
	guard := NewGuard(clock.RealClock{}, renewDeadline, reg)
	return guard.Lock(lock), guard, nil
}
