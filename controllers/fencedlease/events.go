package fencedlease

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
)

// tell tells users (events) and dashboards (metrics and logs) what a status write
// changed, as its plan says (decision.Told).
func (r *Reconciler) tell(ctx context.Context, fl *fencingv1.FencedLease, t *decision.Told) {
	log := logf.FromContext(ctx)
	if t.Slot != "" {
		log = log.WithValues("slot", t.Slot)
	}
	if rv := t.Revoked; rv != nil {
		log.Info("revoked", "pod", klog.KRef(fl.Namespace, rv.PodName), "token", rv.Token, "reason", rv.Reason, "rule", t.Rule, "late", t.Lateness)
		r.metrics.countRevocation(rv.Reason, t.Lateness)
	}
	if h := t.Withdrawn; h != nil {
		log.Info("hand-off withdrawn: the successor no longer waits", "pod", klog.KRef(fl.Namespace, h.PodName), "token", h.Token)
	}
	if h := t.Released; h != nil {
		log.Info("released", "pod", klog.KRef(fl.Namespace, h.PodName), "token", h.Token, "reason", t.ReleaseReason)
		r.metrics.countRelease(t.ReleaseReason)
	}
	if h := t.Granted; h != nil {
		log.Info("granted", "pod", klog.KRef(fl.Namespace, h.PodName), "token", h.Token)
		if !t.PodCreated.IsZero() {
			r.metrics.countGrant(h.AcquireTime.Sub(t.PodCreated))
		}
	}
	for _, e := range t.Events {
		r.record(fl, e)
	}
}

// record records event e: on the FencedLease naming the pod, and on the pod naming the
// FencedLease, as e says.
func (r *Reconciler) record(fl *fencingv1.FencedLease, e decision.Event) {
	pod := podRef(fl.Namespace, e.Holder.PodName, e.Holder.PodUID)
	if e.OnFencedLease {
		r.event(fl, pod, e.OnPod, e.Type, e.Reason, e.Action, e.Note)
	} else if e.OnPod {
		r.eventOnPod(fl, pod, e.Type, e.Reason, e.Action, e.Note)
	}
}

// event records an event on the FencedLease naming the pod, and — onPod — the same event
// on the pod naming the FencedLease.
func (r *Reconciler) event(fl *fencingv1.FencedLease, pod *corev1.Pod, onPod bool, kind, reason, action, note string) {
	if r.recorder == nil {
		return
	}
	r.recorder.Eventf(fl, pod, kind, reason, action, "%s", note)
	if onPod {
		r.eventOnPod(fl, pod, kind, reason, action, note)
	}
}

// eventOnPod records an event on the pod alone, naming the FencedLease.
func (r *Reconciler) eventOnPod(fl *fencingv1.FencedLease, pod *corev1.Pod, kind, reason, action, note string) {
	if r.recorder != nil {
		r.recorder.Eventf(pod, fl, kind, reason, action, "%s", note)
	}
}

func podRef(ns, name string, uid types.UID) *corev1.Pod {
	p := &corev1.Pod{}
	p.Namespace, p.Name, p.UID = ns, name, uid
	p.APIVersion, p.Kind = "v1", "Pod"
	return p
}
