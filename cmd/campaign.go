package main

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fencedlease/fencedlease/controllers/admissioncheck"
	"github.com/fencedlease/fencedlease/controllers/fencedlease"
	"github.com/fencedlease/fencedlease/controllers/leadership"
)

// work is the leader's: the FencedLease controller and the admission-policy check, set up
// on one manager — the process's own when unelected, each candidacy's when elected. Its
// metrics are made once per process.
type work struct {
	// memory is what the controller observed of holders, handed from one candidacy to the
	// next (fencedlease.Memory).
	memory       *fencedlease.Memory
	metrics      *fencedlease.Metrics
	checkMetrics *admissioncheck.Metrics
	concurrency  int
	// agentImage and podWebhook ("" when the pod webhook is not served) are what the
	// admission check compares the installed admission with.
	agentImage, podWebhook string
}

func (w work) setup(mgr ctrl.Manager, o fencedlease.Options) error {
	o.Clock = clock.RealClock{}
	o.Memory = w.memory
	o.Metrics = w.metrics
	o.MaxConcurrentReconciles = w.concurrency
	if _, err := fencedlease.Setup(mgr, o); err != nil {
		return err
	}
	checker, err := admissionChecker(mgr, w.checkMetrics, w.agentImage, w.podWebhook)
	if err != nil {
		return err
	}
	if o.Candidacy != nil {
		mgr = o.Candidacy.Manager(mgr)
	}
	return mgr.Add(checker)
}

// newCampaign campaigns for the leader Lease again and again in this process instead of
// exiting when leadership is lost: each candidacy is a manager of its own — fresh caches
// and informers, an elector on the shared lock, the controller once elected — and the next
// starts only when the last one's term has ended and its runnables have returned
// (controllers/leadership.Campaign).
func newCampaign(cfg *rest.Config, scheme *runtime.Scheme, o options, w work) (*leadership.Campaign, error) {
	lock, guard, err := leaderLock(cfg, o.leader, metrics.Registry)
	if err != nil {
		return nil, err
	}
	return &leadership.Campaign{
		Guard: guard,
		Lock:  lock,
		Probe: func(ctx context.Context) error { return apiServerAnswers(ctx, cfg) },
		Log:   ctrl.Log.WithName("campaign"),
		Build: func(c *leadership.Candidacy) (ctrl.Manager, error) {
			cache := fencedlease.CacheOptions()
			cache.DefaultWatchErrorHandler = c.WatchError
			mgr, err := ctrl.NewManager(cfg, ctrl.Options{
				Scheme:                              scheme,
				Metrics:                             metricsserver.Options{BindAddress: "0"}, // the process's manager serves them
				HealthProbeBindAddress:              "0",
				LeaderElection:                      true,
				LeaderElectionResourceLockInterface: c.Lock(),
				LeaseDuration:                       &o.leader.leaseDuration,
				RenewDeadline:                       &o.leader.renewDeadline,
				RetryPeriod:                         &o.leader.retryPeriod,
				// The campaign releases the Lease itself, once every runnable has returned.
				LeaderElectionReleaseOnCancel: false,
				GracefulShutdownTimeout:       &o.gracefulShutdown,
				Cache:                         cache,
				// The same controller again, in the next candidacy of this process.
				Controller: config.Controller{SkipNameValidation: ptr.To(true)},
			})
			if err != nil {
				return nil, err
			}
			return mgr, w.setup(mgr, fencedlease.Options{Candidacy: c})
		},
	}, nil
}
