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
// Each reconcile observes (the clock first, then the Lease and the labeled pods), decides
// (decide.go: the holder rules of rules.go, first match wins, then the grant rule; pure,
// on a fake clock in the tests), then executes the transitions: a compare-and-swap on the
// Lease where a step says so, one status write, then the Lease and the pods follow the
// status (project.go). The FencedLease status is the write-ahead log. Every step is
// idempotent for the same (pod UID, token), so "a crash after step N" is finished by the
// next reconcile as written below. The code and the tests cite these numbers.
//
// Grant (grantRule; no holder, not suspended, not deleting, tokens left):
//
//	G1. Decide the grant: holder = the oldest candidate (or the successor a hand-off
//	    named, or a waiting pod of a newer revision of the ended holder's workload: H4),
//	    fencingToken+1, the token floored at the Lease's and spec.minFencingToken.
//	    Candidates are Cold (gated by our gate alone) or Warm (admitted in spec.standby
//	    Warm, no gate: already running), and granted in the same order either way, but
//	    that a Warm one not running yet, or on a node cordoned, unreachable or not Ready,
//	    goes behind the others (passOver). A running Warm standby's grant freezes a
//	    startup deadline of two leases, at least warmConfirmFloor, when shorter.
//	    Invariant: from the grant's first record on, the number is spent; a crash may
//	    waste it, never reuse it. On an idle FencedLease (the status named no holder) the
//	    first record is the Lease (G2), and the status follows it (G4); in a failover it is
//	    the Lease's hand-over (X3). When a release ends the previous grant in the same
//	    decision (L3), it is the status, written with the resourceVersion read; crash
//	    after that write: G2 and G3 are done by the next reconcile.
//	G2. Write the Lease: holderIdentity, holder UID, token, leaseDurationSeconds,
//	    acquireTime = renewTime = the grant's time (so the grant's own write is never taken
//	    for a renewal). As a grant's first record: created — which fails, spending
//	    nothing, when any Lease of that name exists (a tombstone the cache did not show,
//	    a foreign one), so it is sent without an uncached read first, and a refused one
//	    makes the next reconciles read the Lease from the API server (uncachedLeases) —
//	    or swapped from the tombstone with the resourceVersion read, so no two grants
//	    both land. Safe before the status, as X3 is: the Lease's token only
//	    rises, every decision floors the status's token at it, and a Lease naming a grant
//	    ahead of the status's token is adopted (adoptRule), never granted again; only the
//	    operator may delete the Lease (the admission policy) but with its namespace.
//	    Crash after G2: the next reconcile adopts the grant and does G3; the tracker
//	    starts the startup deadline from its first look.
//	G3. Write the pod, in one patch: token, state Holding, the holder label, the
//	    scheduling gate removed — only now can a Cold pod start, with FENCING_TOKEN
//	    resolved; a Warm one's workload learns of the grant from the Lease (G2), on its
//	    watch. Demotions of earlier pods come first and drop the holder label in the same
//	    patch that marks them, so no two pods are ever marked Holding, or labeled, at once;
//	    a revoked pod's deletion (X6) comes after this patch, off a Cold holder's way.
//	G4. Write the status for a grant whose first record is the Lease: it waits for the
//	    holder's first renewal, at most coalesceWindow (2 s, half a short lease) on this
//	    process's clock from G2 (deferStatus), so one write records the grant and its
//	    first renewal (R2). A process that did not write G2 (restarted, a new leader)
//	    records it at its first look. Meanwhile the status shows no holder yet.
//
// Renew (the holder, pkg/holder or the agent; the controller only observes):
//
//	R1. The holder renews only while the Lease names it and its token (never the pod name
//	    alone), with the resourceVersion it read, and gives up at its own deadline, which
//	    is shorter than the lease.
//	R2. The controller counts the lease from when it observed renewTime change, on its
//	    own monotonic clock (tracker.go); a new process gives every holder a full lease
//	    from its first look. The first renewal is recorded once in the status
//	    (firstRenewTime): from there the grant runs on its lease duration, before it on
//	    its startup deadline. A renewal alone costs no status write; the first renewal
//	    of a hand-over or of a grant on an idle FencedLease shares its status write (X4,
//	    G4). Once a pass has kept a grant whose first renewal the status records, with
//	    no hand-off, revocation or deletion under way (settled), its renewals are
//	    observed as their Lease events arrive and queue no pass (renewals.go): the pass
//	    its expiry timer brings judges it on them. So a renewal costs no reconcile, and a
//	    long queue delays no observation. An observation made when the event arrives is
//	    never earlier than the renewal's write; a pass that decides on a Lease read before
//	    a renewal meanwhile recorded writes with that read's version, which fails (X3).
//
// Release (releasedRule) — a grant ended without fault:
//
//	L1. The holder pod finished (Succeeded/Failed) or is gone (confirmed by UID with an
//	    uncached read). A terminating pod keeps its grant: its containers may still run.
//	L2. Or the holder cleared holderIdentity on its own Lease; the UID stays (the
//	    admission policy keeps it from the holder), which tells a release from a cut-off.
//	L3. The status drops the holder (and G1 may name the next one in the same write);
//	    then the Lease is cleared and the pod marked Released, without the holder label.
//	    Crash after L3: done next.
//
// Expiry revocation (expiredRule; finishRevocationRule):
//
//	X1. Read the clock, then the Lease: a renewal that lands after the clock reading is
//	    either in the Lease read or fails X3.
//	X2. Judge: no renewal observed for the grant's limit (startup deadline before the first
//	    renewal, lease duration after). Reason: StartupDeadlineExceeded if it never
//	    renewed, HandoffTimeout if its hand-off grace period had ended, else LeaseExpired.
//	X3. Clear the Lease's holder and UID with the resourceVersion read (the
//	    compare-and-swap of client-go's tryAcquireOrRenew): a renewal that landed since
//	    wins, and the decision is made again. When the same decision grants the next pod
//	    (G1), this one write names it instead (the hand-over: holder, UID, token+1, times,
//	    as G2 writes them): the Lease is the grant's first record, and a Warm holder can
//	    start on it at once. Safe without a status write first: token+1 is used on the
//	    Lease only by a compare-and-swap from the Lease that shows the status's token, the
//	    Lease's token only rises, and every decision floors the status's token at the
//	    Lease's, so no later grant can take it again. This process remembers the reason
//	    and the lateness (tracker: revoking) until X4 lands.
//	X4. Write the status: lastRevocation, revocations+1, no holder (and G1 for the next).
//	    After a hand-over the write waits for the new holder's first renewal, at most
//	    coalesceWindow (2 s, half a short lease) on this process's clock (deferStatus),
//	    so one write records the revocation, the grant and the first renewal (R2); the
//	    pods follow the decided status without it (G3, X5, X6, in the passes P1 says), so
//	    a Cold holder starts without it. Meanwhile the status still names the old holder: the Lease, not the
//	    status, is the grant's record, and every decision reads it first.
//	    Crash or conflict after X3: the Lease shows the grant cut off, or handed over; the
//	    next reconcile finishes X4 with the remembered reason and lateness, or — a
//	    restarted process — with the reason the Lease implies (finishRevocationRule: an
//	    expiry, or RevokeRequested while the request stands), and records the handed-over
//	    grant as the Lease shows it (adoptRule), never another; the holder rules judge
//	    an adopted grant at once (adoptedRecheck), not at its startup deadline.
//	X5. Mark the pod Revoked, without the holder label (one patch).
//	X6. Delete the pod under DeletePod, and whatever the policy when it never renewed
//	    (it never ran; kept, it could still start with a dead token). Always after X5,
//	    never instead of it: a terminating pod keeps its labels until it is gone, and
//	    when none of a Service's endpoints is ready, kube-proxy sends its traffic to the
//	    terminating ones that still pass readiness: a deletion alone would leave two pods
//	    labeled holder, and the revoked one could be served.
//	    Two writes, where KeepPod needs one.
//	X7. Cannot start (cannotStartRule): before its first renewal the holder pod reports
//	    a container waiting in ImagePullBackOff, CrashLoopBackOff,
//	    CreateContainerConfigError, CreateContainerError or InvalidImageName, or phase
//	    Failed, or the scheduler has called it Unschedulable for unschedulableBound (60 s
//	    on this process's clock from its first look at the grant). Revoke at once as
//	    PodCannotStart, with what the pod reported as the message, by X3–X6 (deleted
//	    whatever the policy: it never ran). ErrImagePull and ContainerCreating are a start
//	    in progress. A Warm candidate that already reports such a reason is never granted.
//	X8. Lock-delay (revocationDelay, revocationDelayLeft): an involuntary revocation
//	    (LeaseExpired, StartupDeadlineExceeded, HandoffTimeout, RevokeRequested,
//	    LabelRemoved, PodCannotRun) freezes spec.revocationDelaySeconds into status.lastRevocation
//	    (delaySeconds, nextGrantTime), and G1 waits until it has passed: on this process's
//	    clock from when it revoked, or — a process that took over since — from its first
//	    look (tracker: delays). Held=False, RevocationDelayed meanwhile. A release, a
//	    PodCannotStart (it never ran) and a deleted FencedLease get none.
//	X9. Cannot run (cannotRunRule): after its first renewal the holder pod reports a
//	    container (or init container) waiting for one of X7's reasons — a crash loop,
//	    repeated OOM kills among them, behind a sidecar that still renews. Cut off at
//	    once (C1), the Lease's annotation fencing.fencedlease.io/cut-off-reason records
//	    PodCannotRun, so a restarted process revokes it as such (C2) when its lease has
//	    run out, with what the pod reports, or how the container last exited, as the
//	    message. One restart that runs again is not a crash loop: the kubelet reports
//	    CrashLoopBackOff only from the second exit. The policy applies (it ran), and
//	    the lock-delay.
//
// Cut-off (cutOffRunsOutRule) — refuse renewals first, revoke when the lease has run out:
//
//	C1. Clear the Lease's holder and UID with the resourceVersion read (as X3); the
//	    status keeps the holder, so no one is granted yet. The holder's next renewal is
//	    refused (R1), and it stops at its own deadline.
//	C2. Once the lease the holder last renewed has run out on this process's clock,
//	    revoke (X4–X6). A restarted process gives it a whole lease from its first look.
//
// Revoke on request (revokeRequestedRule; annotation fencing.fencedlease.io/revoke-token):
//
//	Q1. The annotation names one token; it never reaches a later grant.
//	Q2. A grant that renewed is cut off (C1) and revoked as RevokeRequested once its lease
//	    has run out (C2). One that never renewed never ran: it is revoked at once (X3–X6);
//	    after a failed X4, at once again, in this process or a restarted one.
//
// Hand-off (askHandoffRule, handoffTimeoutRule):
//
//	H1. A waiting Cold pod of a newer revision of the holder's own Deployment or
//	    StatefulSet: the status records the request (successor, grace period), the Lease
//	    carries the successor annotation, the holder pod shows Draining. The grace period counts on
//	    this process's clock from when it asked, or first saw the request.
//	H2. The holder releases (L2) at a safe point; G1 grants the successor first.
//	H3. The grace period ends without a release: cut off (C1), revoked as HandoffTimeout
//	    when its lease has run out (C2). If the lease runs out first, X2 revokes it as
//	    LeaseExpired.
//	H4. A Warm successor is never asked for: it is Ready by its own probes, so the
//	    rollout goes on and the workload controller ends the holder itself. This process
//	    remembers the newer-revision candidate (for the candidates it was asked about, so
//	    a waiting rollout costs its reads once), and G1 grants it when the holder's grant
//	    ends, even once the holder pod is gone: the grant moves once per rollout. After a
//	    restart, before it looked again, G1 falls back to the oldest candidate.
//
// Authority (the rules that keep others from forging a grant):
//
//	A1. Only pods the admission webhook made candidates (state Waiting, gated by our
//	    gate alone or admitted Warm without any gate, never held a token) are granted; one
//	    pod, one generation. Nobody but the operator changes a pod's standby annotation
//	    or the holder label (the admission policies).
//	A2. A holder that lost its label is revoked (LabelRemoved), not released: it may
//	    still run (labelRemovedRule).
//	A3. A Lease of the FencedLease's name without the lease label is never adopted nor
//	    written (Held=False, LeaseConflict); a deleted FencedLease still revokes its
//	    holder (foreignLeaseRule). No token wraps (TokensExhausted).
//	D1. A FencedLease being deleted revokes its holder (deletingRule), keeps the Lease as
//	    the tombstone with the high-water token, and then lets its finalizer go — not in
//	    the pass that adopted a grant only the Lease recorded (X4's wait), which is
//	    revoked first. The finalizer is there before any grant: put on at creation by
//	    the FencedLease webhook (controllers/finalizerwebhook), or else — the webhook
//	    fails open — written by the first pass before it decides anything.
//
// Priority (priority.go) — what moves first when many FencedLeases are due at once:
//
//	P1. A pass that writes a grant's first record on the Lease (X3 with G2, or G2) while
//	    its status write waits (X4, G4) does what the new holder needs to start, and no
//	    more: for a Warm holder, which starts on the Lease, that write alone; for a Cold
//	    one, which starts at G3, the demotions (X5) and its pod's patch too. The rest — a
//	    Warm holder's pods, a revoked pod's deletion (X6) — follows in the next pass,
//	    which adopts the grant off the Lease as the pass after a crash there would. That
//	    pass, the status write's wait, and the passes that only see a version this
//	    controller's own write produced come back (ownWrites.echo) are queued at the
//	    follow-up priority, behind every FencedLease at the normal one — judgments,
//	    revocations, hand-overs, grants — and any other event (a renewal that is not a
//	    settled grant's, R2; a user's change) raises them to normal. So under a mass failover or a burst of new FencedLeases
//	    every due Lease moves before any FencedLease spends writes that no holder waits
//	    for; the writes are the same in number and order per FencedLease (Lease,
//	    demotions, the holder's patch, the deletion, the status). A follow-up waits only
//	    while work at the normal priority is ready, and a new holder's first renewal
//	    raises its own. A pass that follows its own Lease creation waits until the cache
//	    shows that Lease (ownWrites), so it never creates it again.
//
// The Lease's encoding is read in one place, internal/leaserecord, by this controller,
// pkg/holder, the agent's startupProbe and the kubectl plugin.
//
// # Clocks
//
// Expiry is judged on this process's monotonic clock, read before the Lease, counted from
// the moment it observed the holder's renewTime change; the renewTime value itself,
// written on another machine, is compared only for change. Each grant keeps the lease
// duration it was made with. The assumption is that clocks run at about the same rate;
// they need not agree.
//
// # What is not guaranteed
//
// A holder that is paused or partitioned can keep acting after its lease ended: the
// controller cannot stop it. Only a resource that checks the token rejects its writes.
package fencedlease
