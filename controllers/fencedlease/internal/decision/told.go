package decision

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/eventnote"
)

// Told is what a status write tells once it landed: its events, and — for the logs and
// the metrics — the revocation, release, withdrawn hand-off and grant it records. A
// transition, a grant that ends and the next that begins in one write, is one event on
// the FencedLease (the end's reason and type, both halves in its note) and one on the new
// holder's pod; the ended grant's pod shows state Revoked or Released, and is usually
// deleted, so an event there would be one more write in the failover for nobody.
type Told struct {
	Events []Event
	// Slot names the slot in a FencedLease with slots ("" without): every note starts
	// with it, and the logs carry it.
	Slot string
	// Revoked is the revocation recorded, Rule the rule that decided it, Lateness how
	// long after the exact expiry.
	Revoked  *fencingv1.Revocation
	Rule     string
	Lateness time.Duration
	// Released is the grant released, for ReleaseReason.
	Released      *fencingv1.Holder
	ReleaseReason fencingv1.ReleaseReason
	// Withdrawn is the grant whose hand-off request was withdrawn (H5).
	Withdrawn *fencingv1.Holder
	// Granted is the new grant; PodCreated when its pod was created (zero: unknown), so
	// the wait counts to the grant's time, however long its status write waited.
	Granted    *fencingv1.Holder
	PodCreated time.Time
}

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
