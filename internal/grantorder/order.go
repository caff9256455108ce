// Package grantorder is who may be granted a FencedLease next, and in which order: the
// controller grants by it and `kubectl fencedlease status` shows its queue from it, so
// what the plugin shows is what the controller does.
package grantorder

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// Queue is the waiting queue of a FencedLease with status st, in the order the
// controller grants it: the named successor of a hand-off first, then the oldest
// candidate (ties by name). Tools (kubectl fencedlease status) show it from this, so
// what they show is what the controller does — but for one case it cannot see from the
// objects alone: when a holder's grant ends while a pod of a newer revision of its own
// workload waits, the controller grants that pod first (H4, remembered by the controller); and in
// the pass that revokes a holder that went silent, its node's standbys go last
// (WithSilentNode).
// Warm standbys that cannot take over now go last (PassOver): nodes are the cluster's
// nodes, nil when the caller may not read them (then only a standby not running yet is
// passed over).
func Queue(pods []corev1.Pod, nodes []corev1.Node, st *fencingv1.FencedLeaseStatus) []*corev1.Pod {
	unfit := map[string]string{}
	for i := range nodes {
		if why := NodeUnfit(&nodes[i]); why != "" {
			unfit[nodes[i].Name] = why
		}
	}
	waiting := PassOver(Candidates(pods, st, ""), unfit)
	if i := SuccessorIndex(waiting, st.Holder, nil); i > 0 {
		next := waiting[i]
		copy(waiting[1:i+1], waiting[:i])
		waiting[0] = next
	}
	return waiting
}

// PassOver moves behind the others the Warm candidates that cannot take over now — not
// running yet, or on a node that is cordoned, unreachable or not Ready — keeping each part
// in its order: a healthy standby is granted before an older one whose node was lost,
// which could not confirm the grant. With no other candidate they are still granted: a
// node may come back, and the confirmation bound limits what it costs if it does not.
func PassOver(waiting []*corev1.Pod, unfitNodes map[string]string) []*corev1.Pod {
	passed := func(p *corev1.Pod) int {
		if StandbyUnfit(p, unfitNodes) != "" {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(waiting, func(a, b *corev1.Pod) int { return cmp.Compare(passed(a), passed(b)) })
	return waiting
}

// WithSilentNode adds to unfit the node of a holder revoked in this pass because nothing
// of it renewed — its lease ran out, or it never confirmed its grant — so the standbys on
// that node go behind the others: the node's kubelet may be gone with every container on
// it long before the node controller calls it NotReady (its grace period, 40 s by default,
// outlasts short leases), and each of those standbys would cost a confirmation bound.
func WithSilentNode(unfit map[string]string, rv *fencingv1.Revocation, holder *corev1.Pod) map[string]string {
	if rv == nil || holder == nil || holder.UID != rv.PodUID || holder.Spec.NodeName == "" || unfit[holder.Spec.NodeName] != "" ||
		(rv.Reason != fencingv1.ReasonLeaseExpired && rv.Reason != fencingv1.ReasonStartupDeadlineExceeded) {
		return unfit
	}
	out := maps.Clone(unfit)
	if out == nil {
		out = map[string]string{}
	}
	out[holder.Spec.NodeName] = "node " + holder.Spec.NodeName + " of a holder revoked for " + string(rv.Reason)
	return out
}

// StandbyUnfit says why Warm candidate p cannot take over now, or "" (a Cold candidate,
// gated, has no node yet: it never is).
func StandbyUnfit(p *corev1.Pod, unfitNodes map[string]string) string {
	if !Warm(p) {
		return ""
	}
	if why := unfitNodes[p.Spec.NodeName]; why != "" {
		return why
	}
	if p.Status.Phase != corev1.PodRunning {
		return "not running yet"
	}
	return ""
}

// NodeUnfit says why node n cannot take a grant: cordoned (a drain is coming), tainted
// unreachable, or its Ready condition not True (the node controller's verdict after its
// grace period: the kubelet stopped reporting, or reports NotReady).
func NodeUnfit(n *corev1.Node) string {
	if n.Spec.Unschedulable {
		return fmt.Sprintf("node %s is cordoned", n.Name)
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeUnreachable {
			return fmt.Sprintf("node %s is unreachable", n.Name)
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return fmt.Sprintf("node %s is not Ready (%s)", n.Name, c.Status)
		}
	}
	return ""
}

// SuccessorIndex is where in waiting the next grant goes: to the successor a hand-off
// named when the grant that just ended was handing off, else to newer — a candidate of a
// newer revision of the ended holder's workload (H4) — when it waits, else to the oldest
// candidate.
func SuccessorIndex(waiting []*corev1.Pod, ended *fencingv1.Holder, newer *corev1.Pod) int {
	want := types.UID("")
	switch {
	case ended != nil && ended.Handoff != nil:
		want = ended.Handoff.SuccessorUID
	case ended != nil && newer != nil:
		want = newer.UID
	}
	for i, p := range waiting {
		if want != "" && p.UID == want {
			return i
		}
	}
	return 0
}
