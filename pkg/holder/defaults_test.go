package holder

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
)

// The holder keeps its grant as long as safety allows: the lease duration less a drift
// margin (5 %, at least 500 ms), not a fixed fraction that gives up early.
func TestDefaultRenewDeadlineIsTheLeaseLessTheDriftMargin(t *testing.T) {
	for _, tc := range []struct {
		lease         int32
		cfg           Config
		deadline      time.Duration
		interval      time.Duration
		wantRejection bool
	}{
		{lease: 1, deadline: 500 * time.Millisecond, interval: time.Second / 3},
		{lease: 2, deadline: 1500 * time.Millisecond, interval: 2 * time.Second / 3},
		{lease: 5, deadline: 4500 * time.Millisecond, interval: 5 * time.Second / 3},
		{lease: 15, deadline: 14250 * time.Millisecond, interval: 5 * time.Second},
		{lease: 60, deadline: 57 * time.Second, interval: 20 * time.Second},
		{lease: 15, cfg: Config{DriftMargin: 3 * time.Second}, deadline: 12 * time.Second, interval: 5 * time.Second},
		{lease: 15, cfg: Config{RenewDeadline: 10 * time.Second}, deadline: 10 * time.Second, interval: 5 * time.Second},
		{lease: 15, cfg: Config{RenewDeadline: 15 * time.Second}, wantRejection: true},
		{lease: 15, cfg: Config{DriftMargin: 11 * time.Second}, wantRejection: true}, // deadline below the interval
		// A supervised command's stop grace comes off the deadline (fencedlease hold).
		{lease: 15, cfg: Config{StopGrace: 2 * time.Second}, deadline: 12250 * time.Millisecond, interval: 5 * time.Second},
		{lease: 3, cfg: Config{StopGrace: 2 * time.Second}, wantRejection: true},                                       // 0.5 s left: below the interval
		{lease: 15, cfg: Config{StopGrace: time.Second, RenewDeadline: 14500 * time.Millisecond}, wantRejection: true}, // the kill would land after the lease
	} {
		cfg := tc.cfg
		err := cfg.defaults(&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To(tc.lease)}})
		if tc.wantRejection {
			if err == nil {
				t.Errorf("lease %ds, %+v: accepted deadline %v", tc.lease, tc.cfg, cfg.RenewDeadline)
			}
			continue
		}
		if err != nil {
			t.Errorf("lease %ds, %+v: %v", tc.lease, tc.cfg, err)
			continue
		}
		if cfg.RenewDeadline != tc.deadline || cfg.RenewInterval != tc.interval {
			t.Errorf("lease %ds, %+v: deadline %v interval %v, want %v and %v", tc.lease, tc.cfg, cfg.RenewDeadline, cfg.RenewInterval, tc.deadline, tc.interval)
		}
	}
}
