package decision

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/eventnote"
)

// toldBy is what the status write that records decision d, taken for slot s, tells.
func toldBy(d Decision, s SlotFrame) *Told {
	t := &Told{}
	if s.Sharded {
		t.Slot = strconv.Itoa(int(s.Index))
	}
	say := func(note string) string {
		if t.Slot == "" {
			return note
		}
		return "slot " + t.Slot + ": " + note
	}
	next := d.Granted()
	// ended tells the end of a grant: with the next grant in its note when there is one.
	ended := func(h fencingv1.Holder, kind, reason, action, note string) {
		if next != nil {
			note = eventnote.Transition(note, next.Token, next.PodName)
		}
		t.Events = append(t.Events, Event{Holder: h, Type: kind, Reason: reason, Action: action, Note: say(note), OnFencedLease: true, OnPod: next == nil})
	}
	if tr, rv := d.End, d.Revoked(); rv != nil {
		t.Revoked, t.Rule, t.Lateness = rv, tr.RuleName, tr.Lateness
		detail := string(rv.Reason)
		if rv.Message != "" {
			detail += " (" + rv.Message + ")"
		}
		ended(fencingv1.Holder{PodName: rv.PodName, PodUID: rv.PodUID, Token: rv.Token}, corev1.EventTypeWarning, "Revoked", "Revoke",
			eventnote.Revoked(rv.Token, rv.PodName, detail))
	}
	if tr := d.Ended(WithdrawHandoff); tr != nil {
		t.Withdrawn = &tr.Holder
	}
	if tr := d.Released(); tr != nil {
		t.Released, t.ReleaseReason = &tr.Holder, tr.Release
		ended(tr.Holder, corev1.EventTypeNormal, "Released", "Release", eventnote.Released(tr.Holder.Token, tr.Holder.PodName, string(tr.Release)))
	}
	if next != nil {
		t.Granted = next
		// With an end, told on the FencedLease by the end's event.
		alone := d.Revoked() == nil && d.Released() == nil
		t.Events = append(t.Events, Event{Holder: *next, Type: corev1.EventTypeNormal, Reason: "Granted", Action: "Grant",
			Note: say(eventnote.Granted(next.Token, next.PodName)), OnFencedLease: alone, OnPod: true})
		t.PodCreated = d.Grant.PodCreated
	}
	return t
}
