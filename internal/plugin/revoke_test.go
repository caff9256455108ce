package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease"
)

// Whether a grant ever ran is judged as the controller judges it: from the status's first
// renewal or the Lease's. A holder that renewed before the status recorded it is cut off
// and waited out, and revoke must not say it is revoked at once (issue 48).
func TestRevokeSaysWhatTheOperatorDoes(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		renewed bool
		want    string
	}{
		{"the Lease shows a renewal the status has not recorded", true, "the operator cuts it off now and grants the next pod when its 5s lease has run out"},
		{"never renewed", false, "it has not renewed yet, so it never ran and the operator revokes it at once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "invoices"},
				Status: fencingv1.FencedLeaseStatus{FencingToken: 1,
					Holder: &fencingv1.Holder{PodName: "a", PodUID: "uid-a", Token: 1, LeaseDurationSeconds: 5}}}
			lease := leaseNaming("a", 1, now.Add(-2*time.Second))
			if tc.renewed {
				lease.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-time.Second)}
			}
			c := fake.NewClientBuilder().WithScheme(fencedlease.NewScheme()).WithObjects(fl, lease).Build()
			var out bytes.Buffer
			o := &Options{IOStreams: genericiooptions.IOStreams{Out: &out}, Clock: clocktesting.NewFakeClock(now)}
			if err := o.revoke(context.Background(), c, "ns", "invoices", 0, false, time.Second, ""); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Fatalf("revoke said %q, want %q", out.String(), tc.want)
			}
		})
	}
}
