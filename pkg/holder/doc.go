// Package holder is the workload's side of a FencedLease grant: it renews the Lease the
// operator wrote for this pod, and tells the workload, through a context, when it must
// stop.
//
//	h, err := holder.Start(ctx, cfg) // confirms the grant with a first renewal
//	if err != nil { ... }            // not granted (or no longer)
//	defer h.Release(context.Background())
//	doWork(h.Context(), h.Token())   // pass the token to every fenced write
//
// # Guarantees
//
//   - Context() is cancelled when the grant is lost: the Lease no longer names this pod
//     with this token (revoked, or handed on), or no renewal could be confirmed within
//     RenewDeadline of sending the last confirmed one. RenewDeadline is the lease duration
//     less a drift margin (5 %, at least 500 ms), and the operator counts the duration from
//     when it *observed* that renewal, which is later than when it was sent. So a holder
//     whose clock runs within 5 % of the operator's rate stops at least the margin before
//     the operator may grant anyone else — and keeps its grant through slow renewals for
//     as long as that allows, not a fixed fraction of it.
//   - The identity is (pod name, token), never the pod name alone: a pod re-created under
//     the same name never renews the grant of its predecessor.
//   - Renewals carry the resourceVersion that was read; a write lost to a concurrent
//     change is never forced. Each one changes renewTime (the operator counts a renewal
//     when it changes), even if the clock stood still or was set back.
//   - Release clears the Lease's holder only while it still names this holder and token.
//   - Deadline() and Holding() answer at once: Holding reads the clock itself and is false
//     from the Deadline on, even before the renewal goroutine notices a missed renewal.
//   - Start returns within StartTimeout (its first read of the Lease) plus RenewDeadline
//     (its first renewal), whatever the API server does.
//   - In a Warm standby (a pod that runs before it is granted, its FENCING_TOKEN empty),
//     StartWhenGranted waits on one watch of the Lease — no polling — and takes only a
//     grant that names this pod's name and, when Config.UID is set, its UID. It returns
//     when ctx ends, or once the grant is confirmed as Start confirms it.
//
// # What it cannot do
//
// It cannot stop a process that is paused (GC, a frozen node) between a check of
// Context() and the side effect: the process resumes and writes anyway. That is what the
// fencing token is for: pass Token() to a resource that rejects older tokens (pkg/fence).
package holder
