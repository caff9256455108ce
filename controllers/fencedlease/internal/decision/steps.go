package decision

import (
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

const (
	// ConflictRetry is the first retry after a stale read: short, the newer object is
	// usually already on its way to the cache (staleretry.go backs off from there).
	ConflictRetry = 20 * time.Millisecond
	// CacheBehind is a fallback only: a reconcile that found the cache behind one of its
	// own writes comes back with the watch event that write brings (the FencedLease
	// predicate lets that one through too), not by polling, which under load would burn
	// the CPU the API server needs.
	CacheBehind = time.Second
)

// StepKind is one kind of write a pass makes; a plan runs its steps in this order.
type StepKind int

const (
	// CutLease ends the status's grant on the Lease by compare-and-swap on the version
	// read, before the status records anything, and names the next grant in the same
	// write when there is one (X3, C1; X3 with G2: the hand-over).
	CutLease StepKind = iota
	// TellCutOff tells the user, by event, of a holder cut off on request or because its
	// pod cannot run, while the lease it last renewed runs out (Q2, X9).
	TellCutOff
	// DemoteEnded marks the pod of the grant this decision ends Revoked or Released,
	// without the holder label (X5), before the status write that drops the only record
	// of it a pod whose label was taken off can be found by.
	DemoteEnded
	// WriteStatus records the decision with the resourceVersion read, then tells it by
	// events and metrics (G1, X4).
	WriteStatus
	// WriteLease makes the Lease show the status: its holder or none, and always the
	// high-water token, so it outlives the FencedLease as its tombstone (G2).
	WriteLease
	// DemotePods marks pods that no longer hold Revoked or Released and takes their
	// holder label, before any pod is marked holder (X5).
	DemotePods
	// PromoteHolder gives the holder pod its token, state and label, and lifts its
	// scheduling gate (G3).
	PromoteHolder
	// DeleteRevoked deletes the revoked pods that must go, by UID (X6).
	DeleteRevoked
	// ReleaseFinalizer lets a deleted FencedLease go once no holder remains (D1).
	ReleaseFinalizer
)

var stepNames = [...]string{"cut the grant on the Lease", "tell the cut-off", "demote the ended grant's pod", "write the status",
	"write the Lease", "demote pods", "promote the holder", "delete revoked pods", "release the finalizer"}

func (k StepKind) String() string { return stepNames[k] }

// Step is one planned write, the protocol step (doc.go) it carries out, and what it
// writes, so the shell runs it without going back to the decision.
type Step struct {
	Kind     StepKind
	Protocol string
	// Lease (CutLease) is what the compare-and-swap writes on the Lease read: the grant
	// cut off, or the next one named in its place (the hand-over); nil when the grant
	// never reached the Lease, so nobody could renew it and nothing is written.
	Lease *coordinationv1.Lease
	// Event (TellCutOff) tells the user of the cut-off.
	Event *Event
	// Pod (DemoteEnded) is the pod of the grant that ends.
	Pod types.UID
	// Renewal (WriteLease) is the holder's last renewal seen, kept when the Lease is
	// repaired after someone else rewrote it.
	Renewal Renewal
	// Revoking (CutLease) is the revocation the cut begins, remembered once it landed: a
	// restart finishes it for the same reason, and its lock-delay counts from its time.
	Revoking *PendingRevocation
	// Status (WriteStatus) is the status that records the decision; RevokedAt when the
	// revocation it records was decided (X8 counts the lock-delay from then), zero when
	// it records none.
	Status    *fencingv1.FencedLeaseStatus
	RevokedAt time.Time
	// Told (WriteStatus) is what the status write tells once it landed.
	Told *Told
	// FirstRecord (WriteLease): the Lease is the new grant's first record, and the status
	// follows with its first renewal (G2, G4).
	FirstRecord bool
	// LandsToken: this write carries the decision's new token to the slot's Lease; the
	// slots' grants land in token order (grantturn.go).
	LandsToken bool
}

// Event is an event to record on the FencedLease naming the pod of Holder
// (OnFencedLease), and on that pod naming the FencedLease (OnPod).
type Event struct {
	Holder                     fencingv1.Holder
	Type, Reason, Action, Note string
	OnFencedLease, OnPod       bool
}

// Plan is how one pass carries out its decision: the writes in order, when to look
// again, and whether the grant is settled once every write has landed.
type Plan struct {
	Steps        []Step
	RequeueAfter time.Duration
	Priority     RequeueClass
	// Now is the clock the decision was made on; Granted the grant it makes, or nil.
	Now     time.Time
	Granted *fencingv1.Holder
	// Settles: the grant is kept with nothing of it waiting for a renewal, so its
	// renewals need queue no pass (renewals.go) once this plan has run.
	Settles bool
}

// add appends a step of kind, for protocol step protocol, and returns it to be given
// its values.
func (p *Plan) add(kind StepKind, protocol string) *Step {
	p.Steps = append(p.Steps, Step{Kind: kind, Protocol: protocol})
	return &p.Steps[len(p.Steps)-1]
}

// Step is the plan's write of kind k, or nil.
func (p Plan) Step(k StepKind) *Step {
	for i := range p.Steps {
		if p.Steps[i].Kind == k {
			return &p.Steps[i]
		}
	}
	return nil
}

// landsTokenAt marks the write of kind k as the one that carries the new token to the
// slot's Lease.
func (p *Plan) landsTokenAt(k StepKind) {
	for i := range p.Steps {
		p.Steps[i].LandsToken = p.Steps[i].Kind == k
	}
}

// LandsToken is true when a write of the plan carries a new token to the slot's Lease.
func (p Plan) LandsToken() bool {
	return slices.ContainsFunc(p.Steps, func(s Step) bool { return s.LandsToken })
}

// Has is true when the plan makes a write of kind k.
func (p Plan) Has(k StepKind) bool { return p.Step(k) != nil }

// FirstRecordOnLease is true when the plan grants with the Lease as the grant's first
// record: a holder starts on it, and the status follows with its first renewal (P1).
func (p Plan) FirstRecordOnLease() bool { return p.LandsToken() && !p.Has(WriteStatus) }

// MovesLease is true when the plan writes a Lease before any status write: a grant cut
// off, handed over, or first recorded there.
func (p Plan) MovesLease() bool {
	cut := p.Step(CutLease)
	return cut != nil && cut.Lease != nil || p.FirstRecordOnLease()
}

// RequeueClass is the priority the next pass a plan asks for is queued at (P1,
// priority.go).
type RequeueClass int

const (
	// requeueAsQueued leaves it to the queue.
	requeueAsQueued RequeueClass = iota
	RequeueNormal
	// RequeueFollowUp queues it behind every pass that moves a Lease.
	RequeueFollowUp
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
