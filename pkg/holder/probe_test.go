package holder

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

func TestStarted(t *testing.T) {
	granted := metav1.NewMicroTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	renewed := metav1.NewMicroTime(granted.Add(time.Second))
	lease := func(holder string, token string, renew metav1.MicroTime) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{fencingv1.TokenAnnotation: token}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), AcquireTime: &granted, RenewTime: &renew},
		}
	}
	for name, tc := range map[string]struct {
		l    *coordinationv1.Lease
		want bool
	}{
		"granted, never renewed":    {lease("a", "7", granted), false},
		"renewed":                   {lease("a", "7", renewed), true},
		"another pod's grant":       {lease("b", "7", renewed), false},
		"another token of this pod": {lease("a", "8", renewed), false},
		"released (no holder)":      {&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{fencingv1.TokenAnnotation: "7"}}}, false},
	} {
		if got := Started(tc.l, "a", 7); got != tc.want {
			t.Errorf("%s: Started = %v, want %v", name, got, tc.want)
		}
	}
}
