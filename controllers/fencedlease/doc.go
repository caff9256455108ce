// Package fencedlease is the FencedLease controller: it grants one labeled pod at a time
// a lease and a fencing token, watches the holder's renewals, and revokes a holder whose
// renewals stop.
//
// # Guarantees
//
//   - Tokens for one namespace/name strictly increase and are never reused. A token is
//     spent the moment its first record is written: the Lease's create or
//     compare-and-swap (a grant on an idle FencedLease, G2; a hand-over, X3), or the
//     FencedLease status (with a resourceVersion precondition, and a CEL rule on the
//     status that forbids lowering it); every decision floors the status's token at the
//     Lease's; the Lease keeps the high-water token after the FencedLease is deleted, and
//     a re-created FencedLease continues above it.
//   - At most one pod is granted at a time, as judged by this controller: the Lease and
//     the status each name at most one holder, and a new holder is named only in the
//     same write that ends the previous grant — the status's write, or the Lease's
//     compare-and-swap (the hand-over, X3) — or, on an idle FencedLease, in the Lease's
//     create or compare-and-swap (G2); the status then follows the Lease.
//
// # The protocol, step by step
//
// Each reconcile is one pass over the FencedLease's slots (pass.go; one slot for a
// FencedLease of one grant). For each slot in order it observes (observe.go: the clock
// first, then the Lease and the labeled pods, and what this process remembers of the
// grants), decides and plans in internal/decision, a package that does no I/O (decide.go:
// the holder rules of rules.go, first match wins, then the grant rule; plan.go: the
// writes in order, each carrying what it writes and tagged with the step below it carries
// out: a compare-and-swap on the Lease where a step says so, the status write, then the
// Lease and the pods follow the status). Then it runs the plans (run.go, project.go) —
// the slots' writes before the status, the status once, the writes after it — and
// remembers what landed (remember.go). Every step is idempotent for the same (pod UID,
// token). One line per step and the invariant it keeps; docs/protocol.md says how each
// is done and finished after a crash. The code, the docs and the tests cite these IDs;
// protocol_ids_test.go checks that each cited one is defined here and each defined one
// is cited by a test.
//
// Grant (GrantRule):
//
//	G1. The oldest fit candidate (or the hand-off's successor, or H4's) is granted token+1, floored.
//	G2. The Lease is the grant's first record: created, or swapped from the tombstone, never reused.
//	G3. The pod is patched once (token, Holding, holder label, gate); never two pods Holding.
//	G4. The status records the grant with its first renewal, at most 2 s after G2.
//
// Renew (the holder; the controller only observes):
//
//	R1. A holder renews only while the Lease names it and its token, and stops at its own deadline.
//	R2. The lease counts from when this process saw RenewTime change; a renewal costs no request.
//
// Release (ReleasedRule):
//
//	L1. A holder pod that finished or is gone (by UID) released; a terminating one still holds.
//	L2. A holder that cleared holderIdentity on its own Lease (UID kept) released.
//	L3. The pod is marked Released, then the status drops the holder; the Lease is cleared.
//
// Revocation (ExpiredRule, FinishRevocationRule, CannotStartRule, CannotRunRule):
//
//	X1. The clock is read before the Lease.
//	X2. No renewal seen for the grant's limit (startup deadline, then lease) revokes it.
//	X3. The Lease is cleared or handed over by compare-and-swap; a renewal since wins.
//	X4. The status records the revocation; a failed X4 is finished for the same reason.
//	X5. The revoked pod is marked Revoked without the holder label, before the status forgets it.
//	X6. Under DeletePod, or when it never renewed, the pod is deleted, after X5.
//	X7. A holder that cannot start before its first renewal is revoked at once (PodCannotStart).
//	X8. An involuntary revocation's lock-delay passes before the next grant.
//	X9. A holder that ran and cannot run any more is cut off at once (PodCannotRun).
//
// Cut-off (CutOffRunsOutRule):
//
//	C1. The Lease's holder is cleared by compare-and-swap; the status keeps it; renewals are refused.
//	C2. A cut-off holder is revoked once the lease it last renewed has run out.
//
// Revoke on request (RevokeRequestedRule):
//
//	Q1. A request names one token and never reaches a later grant.
//	Q2. A grant that renewed is cut off, then revoked; one that never renewed, at once.
//
// Hand-off (AskHandoffRule, HandoffWithdrawnRule, HandoffTimeoutRule):
//
//	H1. A waiting Cold pod of a newer revision of the holder's workload gets a hand-off request, once the holder renewed.
//	H2. The holder releases at a safe point; its successor is granted first.
//	H3. No release within the grace period: cut off, revoked as HandoffTimeout.
//	H4. A Warm successor is never asked for; it is granted first when the holder's grant ends, if it runs.
//	H5. A request whose successor no longer waits (a rollback, a delete) is withdrawn; the grant stays.
//	H6. A slot removed by lowering spec.holders asks its holder to hand off to no one (SlotRemovedRule).
//
// Authority (the rules that keep others from forging a grant):
//
//	A1. Only candidates admission gated, that never held a token, are granted.
//	A2. A holder that lost its label is revoked (LabelRemoved), not released.
//	A3. A Lease of the name without the lease label is never adopted nor written.
//	D1. A deleted FencedLease revokes its holder and lets go only once no holder remains.
//
// Admission (admission.go): every candidate is admitted alike, gated, reading no FencedLease.
//
//	W1. A Warm FencedLease's gated waiting candidate is let run: one patch removes the gate and sets standby Warm.
//	W2. A pod waiting 3 s for a FencedLease that does not exist gets an event and the condition FencedLeaseFound False, once.
//	W3. A labeled pod admission never made a candidate gets an event and the condition Admitted False, once; it is never granted.
//
// Slots (pass.go, internal/decision/pass.go; a FencedLease of one grant is slot 0 alone, and spec.holders
// above 1 gives it more):
//
//	N1. Slot k's Lease is the FencedLease's own for k = 0, <name>-slot-k otherwise, labeled with k.
//	N2. One counter: a slot grants above the status's token and every token any slot's Lease carries.
//	N3. A slot never sees the pods another slot names or granted in this pass: no pod holds two slots.
//	N4. The status is projected from every slot's decision and written once a pass, on the version read; D1 waits for every slot's Lease too.
//	N5. The slots' writes run at once, each slot's from when it is judged; their grants land in token order, and a grant the status records first ends the pass's grants.
//
// Priority (priority.go):
//
//	P1. A pass writing a grant's first record on a Lease does only what holders need to start: with slots, the status and the writes of the slots that move no Lease follow in the next pass.
//
// The Lease's encoding is read in one place, pkg/leaserecord, by this controller,
// pkg/holder, the agent's startupProbe and the kubectl plugin.
//
// # Clocks
//
// Expiry is judged on this process's monotonic clock, read before the Lease, counted from
// the moment it observed the holder's RenewTime change; the RenewTime value itself,
// written on another machine, is compared only for change. Each grant keeps the lease
// duration it was made with. The assumption is that clocks run at about the same rate;
// they need not agree.
//
// # What is not guaranteed
//
// A holder that is paused or partitioned can keep acting after its lease ended: the
// controller cannot stop it. Only a resource that checks the token rejects its writes.
package fencedlease
