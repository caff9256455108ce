package agent

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

// oneLease serves one Lease to Get; Update is never called by the probe.
type oneLease struct{ l *coordinationv1.Lease }

func (o oneLease) Leases(string) holder.LeaseClient { return o }
func (o oneLease) Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error) {
	return o.l.DeepCopy(), nil
}
func (o oneLease) Update(context.Context, *coordinationv1.Lease, metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	panic("the probe writes nothing")
}
func (o oneLease) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	panic("the probe watches nothing")
}

// The startupProbe passes only once the Lease shows this pod's grant renewed: the
// operator's own grant write (renewTime = acquireTime) is not enough, nor another token.
func TestProbePassesOnceTheGrantRenewed(t *testing.T) {
	granted := metav1.NewMicroTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	lease := func(token string, renew metav1.MicroTime) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{fencingv1.TokenAnnotation: token}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), AcquireTime: &granted, RenewTime: &renew},
		}
	}
	renewed := metav1.NewMicroTime(granted.Add(time.Second))
	for name, tc := range map[string]struct {
		l    *coordinationv1.Lease
		pass bool
	}{
		"granted, never renewed":    {lease("7", granted), false},
		"renewed":                   {lease("7", renewed), true},
		"another token of this pod": {lease("8", renewed), false},
	} {
		err := Probe(context.Background(), holder.Config{Leases: oneLease{tc.l}, Namespace: "ns", LeaseName: "invoices", Identity: "a", Token: 7}, "")
		if (err == nil) != tc.pass {
			t.Errorf("%s: Probe = %v, want pass=%v", name, err, tc.pass)
		}
	}
}

// In a Warm standby (no token yet) the probe passes once the agent published its state,
// whatever the Lease says: the workload must start before any grant.
func TestProbeOfAWarmStandbyPassesOnceTheAgentRuns(t *testing.T) {
	file := filepath.Join(t.TempDir(), "state")
	cfg := holder.Config{Leases: oneLease{nil}, Namespace: "ns", LeaseName: "invoices", Identity: "a"}
	if err := Probe(context.Background(), cfg, file); err == nil {
		t.Fatal("passed before the agent published its state")
	}
	board := newStateBoard(file, 0, clock.RealClock{}, logr.Discard())
	if got := board.get().State; got != StateWaiting {
		t.Fatalf("a warm agent starts as %s, want %s", got, StateWaiting)
	}
	if err := Probe(context.Background(), cfg, file); err != nil {
		t.Fatalf("refused once the agent runs: %v", err)
	}
}
