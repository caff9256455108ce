package fencedlease

import (
	"cmp"
	"context"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// observe reads the clock, then the Lease and the labeled pods, confirms the holder pod
// by UID, and reads what this process remembers of the grants (once a pass): when the
// holder was last seen renewing, counting a RenewTime that changed as a renewal seen now.
// The clock comes first: a renewal that lands after that reading is either in the Lease
// read here, or makes the revocation's compare-and-swap on the Lease fail. So is one the
// cache has not shown yet: the compare-and-swap carries the version read, so the cache
// may lag without a holder ever being revoked for a renewal that landed.
func (r *Reconciler) observe(ctx context.Context, fl *fencingv1.FencedLease, uncached bool) (decision.World, error) {
	p, err := r.beginPass(ctx, fl)
	if err != nil {
		return decision.World{}, err
	}
	return r.observeSlot(ctx, fl, p.Frame(0), uncached)
}

// observeSlot is observe for slot s of fl (for a FencedLease with slots, fl is the
// slot's view): the slot's Lease, its memory, the pods it may see.
func (r *Reconciler) observeSlot(ctx context.Context, fl *fencingv1.FencedLease, s decision.SlotFrame, uncached bool) (decision.World, error) {
	key := client.ObjectKeyFromObject(fl)
	w := decision.World{FL: fl, Now: r.clock.Now(), Memory: r.grants.Read(s.MemoryKey(key)), Slot: s, Recorded: fl.Status.FencingToken}
	if s.Sharded {
		w.Recorded = s.Recorded
	}
	var err error
	// A grant's Lease is read from the API server when the cache misses it: the first
	// look at a grant is taken with the Lease as it is, as a second look with the Lease's
	// RenewTime would count as a renewal.
	uncached = uncached || fl.Status.Holder != nil
	if w.Lease, w.LeaseUnread, err = r.readLease(ctx, s.LeaseKey(fl), uncached); err != nil {
		return w, err
	}
	w.Pods = s.Visible() // every slot judges the pods the pass began with
	w.Candidates = s.VisibleCandidates()
	if !s.Sharded && fl.Status.FencingToken == 0 {
		w.Floor = s.Pass.Floor
	}
	w.UnfitNodes = r.unfitNodes(w.Pods)
	w.Record = leaserecord.Read(w.Lease)
	if h := fl.Status.Holder; h != nil {
		if err := r.observeHolder(ctx, &w, h, s); err != nil {
			return w, err
		}
	}
	if err := r.observeGrantOnLease(ctx, &w); err != nil {
		return w, err
	}
	if err := r.observeLastRevocation(ctx, &w); err != nil {
		return w, err
	}
	return w, nil
}

// observeHolder reads what judging the grant h the status names needs: this process's
// record of it and the renewal it sees now, its pod (by UID, wherever its label went), the
// hand-off's start, and the successor a hand-off would go to.
func (r *Reconciler) observeHolder(ctx context.Context, w *decision.World, h *fencingv1.Holder, s decision.SlotFrame) error {
	fl, rec := w.FL, w.Record
	w.Held = w.Memory.Of(h.PodUID, h.Token)
	w.Held.Renewal = w.Held.Observe(renewalOn(rec, h), r.clock.Now())
	// Not among the labeled pods: gone, or still there without its label. Unless this
	// process handed its grant over already and made its pod follow (X5): then the
	// status only waits for the next holder's first renewal (deferStatus), and asking
	// again at every reconcile of that wait would be a read per event for a pod that
	// is gone. A hand-over to a Warm successor wrote the Lease alone (P1): its old
	// holder's pod, its label maybe taken off since, is still to be marked.
	if w.Holder = w.PodOf(h.PodUID); w.Holder == nil && !w.Held.Revoking.PodsFollowed {
		holder, err := r.podByUID(ctx, fl.Namespace, h.PodName, h.PodUID)
		if err != nil {
			return err
		}
		if holder != nil {
			w.Holder = holder
			w.Unlabeled = append(w.Unlabeled, *holder)
		}
	}
	if h.Handoff != nil {
		// The grace period counts from this process's first look at the request.
		w.HandoffSince = cmp.Or(w.Held.HandoffSince, w.Now)
	} else if fl.DeletionTimestamp == nil {
		cands := s.MayGrant(decision.NotAwaitingW1(fl, decision.CandidatesFor(*w, &fl.Status, ""))) // only a pod this slot may be granted
		successor, err := r.successorOf(ctx, &w.Held, w.Holder, cands)
		if err != nil {
			return err
		}
		w.Successor = successor
	}
	return nil
}

// observeGrantOnLease finds the pod of a grant the Lease records and the status does not
// yet, among the namespace's pods when its label is gone.
func (r *Reconciler) observeGrantOnLease(ctx context.Context, w *decision.World) error {
	rec := w.Record
	if !rec.GrantAbove(w.Recorded) {
		return nil
	}
	w.GrantedOnLeaseAt = w.Memory.Of(rec.HolderUID, rec.Token).GrantedOnLeaseAt
	if w.PodOf(rec.HolderUID) != nil {
		return nil
	}
	// A grant the status does not record, its pod not among the labeled ones: found by
	// UID whatever became of its label, so the grant is recorded and its pod's marks taken
	// back — or, its pod marked with the grant's end already, not recorded twice
	// (adoptRule). Released on the Lease, its name went with holderIdentity: looked for
	// among the namespace's pods.
	var p *corev1.Pod
	var err error
	if rec.Holder != "" {
		p, err = r.podByUID(ctx, w.FL.Namespace, rec.Holder, rec.HolderUID)
	} else {
		p, err = podWithUID(ctx, r.apiReader, w.FL.Namespace, rec.HolderUID)
	}
	if err != nil {
		return err
	}
	if p != nil {
		w.Unlabeled = append(w.Unlabeled, *p)
	}
	return nil
}

// observeLastRevocation: the lock-delay's start, and the pod of a revocation for a
// removed label, still to be marked.
func (r *Reconciler) observeLastRevocation(ctx context.Context, w *decision.World) error {
	fl := w.FL
	if rv := fl.Status.LastRevocation; rv != nil && rv.DelaySeconds > 0 {
		// A lock-delay this process did not begin (it took over since) counts from now.
		w.DelaySince = cmp.Or(w.Memory.Of(rv.PodUID, rv.Token).DelaySince, w.Now)
	}
	if rv := fl.Status.LastRevocation; rv != nil && rv.Reason == fencingv1.ReasonLabelRemoved && w.PodOf(rv.PodUID) == nil {
		// Finish marking (and deleting) a pod revoked for losing its label: one uncached
		// read a reconcile, until the next revocation.
		p, err := r.podByUID(ctx, fl.Namespace, rv.PodName, rv.PodUID)
		if err != nil {
			return err
		}
		if p != nil {
			w.Unlabeled = append(w.Unlabeled, *p)
		}
	}
	return nil
}

// UnfitNodes says which of the nodes the Warm pods among pods run on cannot take a grant
// now, and why.
func (r *Reconciler) unfitNodes(pods []*corev1.Pod) map[string]string {
	var out map[string]string
	for _, p := range pods {
		node := p.Spec.NodeName
		if r.nodes == nil || node == "" || !grantorder.Warm(p) {
			continue
		}
		if why := r.nodes.unfit(node); why != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[node] = why
		}
	}
	return out
}

// successorOf is the first candidate of a newer revision of grant g's workload (see
// newerRevision), or nil; pod is g's pod (nil: gone). The answer is kept in g for the
// candidates it was given, so a rollout that waits costs its reads once, not at every
// renewal, and it outlives the holder pod: a Warm holder is usually deleted by its own
// controller before the grant moves on, and the next grant still goes to the newest
// revision.
func (r *Reconciler) successorOf(ctx context.Context, g *decision.GrantRecord, pod *corev1.Pod, cands []*corev1.Pod) (*corev1.Pod, error) {
	if len(cands) == 0 {
		return nil, nil
	}
	ids := make([]string, len(cands))
	for i, c := range cands {
		ids[i] = string(c.UID)
	}
	asked := strings.Join(ids, ",")
	if a := g.Newer; a.Candidates != "" && (a.Candidates == asked || pod == nil) {
		return decision.FindCandidate(cands, a.Successor), nil
	}
	if pod == nil {
		return nil, nil
	}
	next, err := r.newerRevision(ctx, pod, cands)
	if err != nil {
		return nil, err
	}
	g.Newer = decision.NewerRevisionAnswer{Candidates: asked}
	if next != nil {
		g.Newer.Successor = next.UID
	}
	return next, nil
}

// renewalOn is the RenewTime the holder of grant h wrote on the Lease; nil while the Lease
// does not show the grant, or shows only the controller's own grant-time write (its
// RenewTime is the acquireTime): that is not a renewal.
func renewalOn(rec leaserecord.Record, h *fencingv1.Holder) *metav1.MicroTime {
	if rec.Shows(h.PodName, h.PodUID, h.Token) && rec.Renewed() {
		return rec.RenewTime
	}
	return nil
}

// readLease reads the Lease from the cache, which holds the operator's (labeled) Leases
// and follows every renewal without a request. Only a Lease the cache does not show —
// none yet, one the cache has not caught up with, or a foreign one without the label —
// costs a read. nil when there is none.
func (r *Reconciler) readLease(ctx context.Context, key client.ObjectKey, uncached bool) (_ *coordinationv1.Lease, unread bool, _ error) {
	lease := &coordinationv1.Lease{}
	err := r.Get(ctx, key, lease)
	if apierrors.IsNotFound(err) {
		if !uncached && !r.uncached.has(key) {
			return nil, true, nil // not in the cache; the API server not asked (yet)
		}
		err = r.apiReader.Get(ctx, key, lease)
		r.uncached.found(key, err == nil)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return lease, false, nil
}

// podByUID reads pod (name, uid) uncached, for a pod the label-filtered cache does not
// show: so a pod that lost its label is never mistaken for one that is gone. It returns
// nil when the pod is gone (a pod of the same name with another UID is another pod).
func (r *Reconciler) podByUID(ctx context.Context, ns, name string, uid types.UID) (*corev1.Pod, error) {
	return readByUID(ctx, r.apiReader, &corev1.Pod{}, ns, name, uid)
}
