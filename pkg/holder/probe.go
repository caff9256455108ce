package holder

import (
	"context"
	"fmt"
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// Started reports whether l shows grant (identity, token) renewed at least once since it
// was made: its holder confirmed it. A Lease the operator has only written (grant step 2)
// has renewTime equal to acquireTime.
func Started(l *coordinationv1.Lease, identity string, token int64) bool {
	return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == identity &&
		l.Annotations[fencingv1.TokenAnnotation] == strconv.FormatInt(token, 10) &&
		l.Spec.RenewTime != nil && l.Spec.AcquireTime != nil && !l.Spec.RenewTime.Equal(l.Spec.AcquireTime)
}

// Probe answers the agent's startupProbe: nil once the Lease shows cfg's grant renewed.
// Native sidecars hold back the containers after them until their startupProbe passes,
// so the workload starts only after the agent's first confirmed renewal, and a grant
// that never renewed is a grant whose workload never ran.
func Probe(ctx context.Context, cfg Config) error {
	l, err := cfg.Leases.Leases(cfg.Namespace).Get(ctx, cfg.LeaseName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !Started(l, cfg.Identity, cfg.Token) {
		return fmt.Errorf("lease %s/%s does not show token %d of %s renewed yet", cfg.Namespace, cfg.LeaseName, cfg.Token, cfg.Identity)
	}
	return nil
}
