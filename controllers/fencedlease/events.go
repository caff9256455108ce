package fencedlease

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/internal/eventnote"
)

// emitEvents tells users (events) and dashboards (metrics) what a status write changed. A
// transition — a grant that ends and the next that begins in one write — is one event on
// the FencedLease (the end's reason and type, both halves in its note) and one on the new
// holder's pod; the ended grant's pod shows state Revoked or Released, and is usually
// deleted, so an event there would be one more write in the failover for nobody. In a
// FencedLease with slots, slot names the slot ("" without slots): every note starts with
// it, and the logs carry it.
func (r *Reconciler) emitEvents(ctx context.Context, fl *fencingv1.FencedLease, d decision.Decision, slot string) {
	log := logf.FromContext(ctx)
	if slot != "" {
		log = log.WithValues("slot", slot)
	}
	say := func(note string) string {
		if slot == "" {
			return note
		}
		return "slot " + slot + ": " + note
	}
	next := d.Granted()
	// ended tells the end of a grant: with the next grant in its note when there is one.
	ended := func(pod *corev1.Pod, kind, reason, action, note string) {
		if next != nil {
			note = eventnote.Transition(note, next.Token, next.PodName)
		}
		r.event(fl, pod, next == nil, kind, reason, action, say(note))
	}
	if t, rv := d.End, d.Revoked(); rv != nil {
		pod := podRef(fl.Namespace, rv.PodName, rv.PodUID)
		log.Info("revoked", "pod", klog.KObj(pod), "token", rv.Token, "reason", rv.Reason, "rule", t.RuleName, "late", t.Lateness)
		detail := string(rv.Reason)
		if rv.Message != "" {
			detail += " (" + rv.Message + ")"
		}
		ended(pod, corev1.EventTypeWarning, "Revoked", "Revoke", eventnote.Revoked(rv.Token, rv.PodName, detail))
		r.metrics.countRevocation(rv.Reason, t.Lateness)
	}
	if t := d.Ended(decision.WithdrawHandoff); t != nil {
		log.Info("hand-off withdrawn: the successor no longer waits", "pod", klog.KRef(fl.Namespace, t.Holder.PodName), "token", t.Holder.Token)
	}
	if t := d.Released(); t != nil {
		h := t.Holder
		pod := podRef(fl.Namespace, h.PodName, h.PodUID)
		log.Info("released", "pod", klog.KObj(pod), "token", h.Token, "reason", t.Release)
		ended(pod, corev1.EventTypeNormal, "Released", "Release", eventnote.Released(h.Token, h.PodName, string(t.Release)))
		r.metrics.countRelease(t.Release)
	}
	if next != nil {
		pod := podRef(fl.Namespace, next.PodName, next.PodUID)
		log.Info("granted", "pod", klog.KObj(pod), "token", next.Token)
		note := say(eventnote.Granted(next.Token, next.PodName))
		if d.Revoked() != nil || d.Released() != nil {
			r.eventOnPod(fl, pod, corev1.EventTypeNormal, "Granted", "Grant", note) // told on the FencedLease with the end
		} else {
			r.event(fl, pod, true, corev1.EventTypeNormal, "Granted", "Grant", note)
		}
		if t := d.Grant; !t.PodCreated.IsZero() {
			r.metrics.countGrant(next.AcquireTime.Sub(t.PodCreated)) // the grant's time: its status write may have waited
		}
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
