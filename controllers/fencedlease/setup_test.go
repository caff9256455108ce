package fencedlease

import (
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fencedlease/fencedlease/controllers/leadership"
)

// The one constructor refuses what would run the controller wrong, before it touches the
// API server: no guard where a leader is elected, no clock, no metrics, no workers.
func TestSetupRefusesAMissingDependency(t *testing.T) {
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{Scheme: NewScheme(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	ok := Options{Unelected: true, Clock: clock.RealClock{}, Metrics: NewMetrics(nil), MaxConcurrentReconciles: 1}
	guard := leadership.NewGuard(clock.RealClock{}, time.Second, nil)
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"a leader elected without a guard", func(o *Options) { o.Unelected = false }, "a leadership Guard or Candidacy is required"},
		{"a guard on an unelected replica", func(o *Options) { o.Guard = guard }, "exclude each other"},
		{"a candidacy on an unelected replica", func(o *Options) { o.Candidacy = &leadership.Candidacy{} }, "exclude each other"},
		{"a guard and a candidacy", func(o *Options) {
			o.Unelected, o.Guard, o.Candidacy = false, guard, &leadership.Candidacy{}
		}, "exclude each other"},
		{"no clock", func(o *Options) { o.Clock = nil }, "needs a Clock"},
		{"no metrics", func(o *Options) { o.Metrics = nil }, "needs Metrics"},
		{"no workers", func(o *Options) { o.MaxConcurrentReconciles = 0 }, "at least 1"},
	} {
		o := ok
		tc.mod(&o)
		if _, err := Setup(mgr, o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Setup = %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if err := (&Reconciler{}).SetupWithManager(mgr); err == nil || !strings.Contains(err.Error(), "needs a Client") {
		t.Errorf("a bare Reconciler was set up: %v", err)
	}
}
