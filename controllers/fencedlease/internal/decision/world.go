package decision

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// World is what a reconcile observed.
type World struct {
	FL    *fencingv1.FencedLease
	Lease *coordinationv1.Lease // nil when there is none yet
	// Record is lease decoded, once a pass (pkg/leaserecord).
	Record leaserecord.Record
	Pods   []*corev1.Pod // every pod labeled for this FencedLease that this slot may see
	// Candidates are the candidates among Pods in grant order (grantorder.Candidates),
	// whatever the status names: CandidatesFor leaves those out.
	Candidates []*corev1.Pod
	// Holder is the pod status.holder names, confirmed by UID: from pods, or read
	// uncached by name when it is not among them. nil when it is gone.
	Holder *corev1.Pod
	// Unlabeled are pods outside pods that the projection must still reach: a holder
	// that lost its label, or the pod of a LabelRemoved revocation not yet finished.
	Unlabeled []corev1.Pod
	// Memory is what this process remembered of the FencedLease's grants when the pass
	// began (grantmemory.go); the pass's outcome is written back once, by remember.
	Memory Recall
	// Held is the record of the grant the status names, as this pass observed it: its
	// renewal looked at now, its hand-off, pending revocation and newer-revision answer.
	// Zero without a holder.
	Held GrantRecord
	// LeaseUnread: the cache shows no Lease and the API server was not asked (lease nil).
	LeaseUnread bool
	// GrantedOnLeaseAt is when this process wrote the grant the Lease names and the status
	// does not record yet (G2 on an idle FencedLease); zero when it did not.
	GrantedOnLeaseAt time.Time
	// Successor is a waiting pod of a newer revision of the holder's own Deployment or
	// StatefulSet; looked up only while the holder has not been asked to hand off.
	Successor *corev1.Pod
	// HandoffSince is when this process first saw the holder asked to hand off.
	HandoffSince time.Time
	// DelaySince is when this process began the lock-delay of status.lastRevocation
	// (zero when it has none).
	DelaySince time.Time
	// UnfitNodes says, of the nodes Warm candidates run on, why one cannot take a grant
	// now (cordoned, unreachable, not Ready); a node that can is absent.
	UnfitNodes map[string]string
	// Now is the controller's clock, read before the Lease; it carries a monotonic
	// reading in production.
	Now time.Time
	// Slot is the slot this pass judges (slots.go); zero for a FencedLease without slots.
	Slot SlotFrame
	// Recorded is the highest token the status records for the grants of this Lease: a
	// Lease naming a grant above it carries one the status does not record yet.
	Recorded int64
	// Floor is the highest token the Leases of the FencedLease's other slots carry, read
	// while its status has issued none (re-created, maybe with fewer slots than before).
	Floor int64
}

// Input is the world classified once for the rules: the Lease read through the one
// reader, relative to the grant the status names, and the grant's clocks.
type Input struct {
	World
	// H is the grant the status names; nil when none.
	H     *fencingv1.Holder
	State leaserecord.State
	// Started: h renewed at least once (recorded in the status, or read off the Lease).
	Started bool
	// revokeRequested: the FencedLease asks to revoke exactly h (Q1).
	revokeRequested bool
	// limit is h's running limit, left what remains of it since the last observed
	// renewal, graceLeft what remains of a hand-off grace period (0 without a request).
	limit, left, graceLeft time.Duration
	// cannotStart says why h's pod, never renewed, cannot start ("" when nothing says so);
	// unschedulableLeft is how long an unschedulable one has before that counts (0 when
	// it is not unschedulable, or already counts).
	cannotStart       string
	unschedulableLeft time.Duration
	// cannotRun says why h's pod, renewed, has a container that cannot run ("" when
	// nothing says so).
	cannotRun string
	// lastCrash says how a container of h's pod last ended, when one restarted ("" when
	// none did): what a cut-off holder between two back-offs still shows.
	lastCrash string
	// handedOver: the Lease names the next grant already — the hand-over's
	// compare-and-swap (X3 with G2), or a grant's first write on an idle FencedLease
	// (G2), landed, and the status write after it did not (yet).
	handedOver bool
}

// handedOver: the Lease carries a grant above every token the status records — named
// (the hand-over's compare-and-swap, X3 with G2, or G2 on an idle FencedLease), or
// already released by its holder while the status write after it had not landed (an
// operator that died in between): the status's grant, if any, ended on the Lease.
func handedOver(state leaserecord.State, rec leaserecord.Record, recorded int64) bool {
	return (state == leaserecord.StateOther || state == leaserecord.StateTombstone) && rec.GrantAbove(recorded)
}

// PodOf is the pod of w.Pods with uid, or nil.
func (w World) PodOf(uid types.UID) *corev1.Pod {
	for _, p := range w.Pods {
		if p.UID == uid {
			return p
		}
	}
	return nil
}

// anyPodOf is the pod with uid among w.Pods and w.Unlabeled, or nil.
func (w World) anyPodOf(uid types.UID) *corev1.Pod {
	if p := w.PodOf(uid); p != nil {
		return p
	}
	return FindPod(w.Unlabeled, uid)
}

// CandidatesFor are w's candidates in grant order, but for the holder and the last
// revoked pod of status st and the pod of a grant that ended: grantorder.Candidates of
// w.Pods, from the order the pass sorted once.
func CandidatesFor(w World, st *fencingv1.FencedLeaseStatus, ended types.UID) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(w.Candidates))
	for _, p := range w.Candidates {
		if p.UID == ended || (st.Holder != nil && p.UID == st.Holder.PodUID) ||
			(st.LastRevocation != nil && p.UID == st.LastRevocation.PodUID) {
			continue
		}
		out = append(out, p)
	}
	return out
}
