// Package fencedlease is the FencedLease controller: it grants one labeled pod at a time
// a lease and a fencing token, watches the holder's renewals, and revokes a holder whose
// renewals stop.
//
// # Guarantees
//
//   - Tokens for one namespace/name strictly increase and are never reused. A token is
//     spent the moment the FencedLease status that names it is written (with a
//     resourceVersion precondition, and a CEL rule on the status that forbids lowering
//     it); the Lease keeps the high-water token after the FencedLease is deleted, and a
//     re-created FencedLease continues above it.
//   - At most one pod is granted at a time, as judged by this controller: the status names
//     at most one holder, and a new holder is named only in the same write that ends the
//     previous grant.
//
// # How a grant is written
//
// The FencedLease status is the write-ahead log. Each reconcile decides the next status
// (pure, in decide.go), writes it once, and then projects it onto the Lease and the pods
// (project.go). Every projection step is idempotent for the same (pod UID, token), so a
// controller that crashed halfway finishes the grant it started instead of starting a new
// one.
//
// # Clocks
//
// Expiry is judged on this process's monotonic clock, read before the Lease, counted from
// the moment it observed the holder's renewTime change; the renewTime value itself,
// written on another machine, is compared only for change. A revocation for expiry is a
// compare-and-swap: the Lease's holder is cleared with the resourceVersion that was read,
// so a renewal that landed in between wins, and only then is the revocation written to the
// status. Each grant keeps the lease duration it was made with. A controller that starts (or becomes leader) knows nothing
// of earlier observations and gives every holder a full duration from its first look. The
// assumption is that clocks run at about the same rate; they need not agree.
//
// # Authority
//
// Only pods the admission webhook made candidates (state Waiting, still gated) are
// granted. A holder is confirmed by UID with an uncached read before it is released as
// gone: one that lost its label is revoked. A Lease without the lease label is never
// adopted (Held=False, LeaseConflict), and no token wraps (TokensExhausted). The admission
// policies in config/policy keep everyone else from forging these states.
//
// # What is not guaranteed
//
// A holder that is paused or partitioned can keep acting after its lease ended: the
// controller cannot stop it. Only a resource that checks the token rejects its writes.
package fencedlease
