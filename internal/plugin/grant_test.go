package plugin

import (
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

func leaseNaming(pod string, token int64, acquired time.Time) *coordinationv1.Lease {
	at := metav1.NewMicroTime(acquired)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "invoices",
			Labels:      map[string]string{fencingv1.LeaseLabel: "invoices"},
			Annotations: map[string]string{fencingv1.TokenAnnotation: strconv.FormatInt(token, 10), fencingv1.HolderUIDAnnotation: "uid-" + pod}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(pod), LeaseDurationSeconds: ptr.To[int32](5), AcquireTime: &at, RenewTime: &at},
	}
}

// The operator names a grant on the Lease first and the status follows with the first
// renewal: in between, the plugin shows (and revokes) the grant the Lease names — not the
// ended one the status still names, nor none.
func TestTheGrantInForceIsTheLeasesWhileTheStatusFollows(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "invoices"},
		Status: fencingv1.FencedLeaseStatus{FencingToken: 1, Holder: &fencingv1.Holder{PodName: "a", PodUID: "uid-a", Token: 1}}}
	lease := leaseNaming("b", 2, now.Add(-time.Second))

	h, pending := currentGrant(fl, lease)
	if h == nil || h.PodName != "b" || h.Token != 2 || !pending || !h.AcquireTime.Equal(ptr.To(metav1.NewMicroTime(now.Add(-time.Second)))) {
		t.Fatalf("currentGrant = %+v, pending %v; want b's token 2 from the Lease, pending", h, pending)
	}
	st := &Status{Namespace: "ns", Name: "invoices", Ready: "True", now: now, Holder: holderStatus(h, lease, now)}
	st.Holder.Recording = pending
	var out strings.Builder
	if err := st.text(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"b, token 2, granted 1s ago", "not recorded yet"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("status text lacks %q:\n%s", want, out.String())
		}
	}

	fl.Status = fencingv1.FencedLeaseStatus{FencingToken: 2, Holder: &fencingv1.Holder{PodName: "b", PodUID: "uid-b", Token: 2}}
	if h, pending := currentGrant(fl, lease); h != fl.Status.Holder || pending {
		t.Fatalf("once recorded: %+v pending %v, want the status's holder", h, pending)
	}
	foreign := lease.DeepCopy()
	foreign.Labels = nil
	fl.Status = fencingv1.FencedLeaseStatus{}
	if h, _ := currentGrant(fl, foreign); h != nil {
		t.Fatalf("a foreign Lease's holder taken for the grant: %+v", h)
	}
}
