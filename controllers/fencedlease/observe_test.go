package fencedlease

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// observeStep is one reconcile's observation and decision at the fake clock's time, run
// by the production code: Reconciler.observe reads lease, the labeled pods and extra
// (pods only an uncached read finds, ReplicaSets) from a fake API server, with grant
// memory tr; decide decides; then the memory is written as after a pass whose status
// write landed (remember). fl takes the decided status, as the next read would show it.
func observeStep(tr *decision.GrantMemory, c *clocktesting.FakeClock, fl *fencingv1.FencedLease, lease *coordinationv1.Lease, pods []corev1.Pod, extra []client.Object) decision.Decision {
	w := observeWorld(tr, c, fl, lease, pods, extra)
	d := decision.Decide(w)
	fl.Status = d.Status
	tr.Write(decision.SlotKey{Lease: client.ObjectKeyFromObject(fl)}, decision.Remember(w, d.Plan, decision.Landed{Status: true}, c.Now())) // as after the status write
	return d
}

// observeWorld is Reconciler.observe on a fake API server holding lease, pods and extra.
func observeWorld(tr *decision.GrantMemory, c *clocktesting.FakeClock, fl *fencingv1.FencedLease, lease *coordinationv1.Lease, pods []corev1.Pod, extra []client.Object) decision.World {
	var objs []client.Object
	if lease != nil {
		objs = append(objs, lease.DeepCopy())
	}
	for i := range pods {
		p := pods[i].DeepCopy()
		if p.DeletionTimestamp != nil && len(p.Finalizers) == 0 {
			p.Finalizers = []string{"test/terminating"} // the fake refuses a deleted object without one
		}
		objs = append(objs, p)
	}
	api := fake.NewClientBuilder().WithScheme(NewScheme()).WithObjects(append(objs, extra...)...).Build()
	r := &Reconciler{Client: api, apiReader: api, clock: c, pods: labeledPods{api}, grants: tr}
	w, err := r.observe(context.Background(), fl, true)
	if err != nil {
		panic(err)
	}
	return w
}
