// Package invariants is the protocol's invariants, written once and checked by every
// test that watches the protocol run: the crash-point harness and the generated histories
// of controllers/fencedlease (after every step), the chaos recorder on envtest and on real
// nodes (at every event it observes). docs/development.md, "What the tests check, and how", lists
// them.
//
// A Checker remembers what it has seen of one FencedLease's objects, so that each
// observation is judged against the history before it: a token never goes down, a pod
// whose grant ended never holds again, a token never names a second pod.
package invariants

import (
	"fmt"
	"maps"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// Checker checks the invariants on what it observes of the FencedLease it is named for.
// Its methods return the violations of that observation (none: nil). It is not safe for
// concurrent use.
type Checker struct {
	name        string
	leaseTokens map[string]int64    // each Lease's highest token seen
	statusToken int64               // status.fencingToken's highest
	holders     int32               // spec.holders, the largest seen (1 when unset)
	candidates  map[types.UID]bool  // pods seen with the FencedLease's lease label
	ended       map[types.UID]bool  // pods seen Released or Revoked
	podToken    map[types.UID]int64 // the token each pod was first marked with
	tokenPod    map[int64]types.UID // the pod each token was first seen naming
	accepted    map[string]int64    // each resource's highest accepted token
}

// New is a Checker for the FencedLease named name (its namespace is the caller's to keep).
func New(name string) *Checker {
	return &Checker{name: name, leaseTokens: map[string]int64{}, candidates: map[types.UID]bool{}, ended: map[types.UID]bool{},
		podToken: map[types.UID]int64{}, tokenPod: map[int64]types.UID{}, accepted: map[string]int64{}}
}

// Objects observes one read of the FencedLease (nil once it is gone), its Leases and its
// pods, read in that order: a FencedLease seen gone is then no newer than the Leases and
// pods read after it, which the finalizer invariant needs.
func (c *Checker) Objects(fl *fencingv1.FencedLease, leases []coordinationv1.Lease, pods []corev1.Pod) []string {
	var out []string
	if fl != nil {
		out = append(out, c.FencedLease(fl)...)
	}
	for i := range leases {
		out = append(out, c.Lease(&leases[i])...)
	}
	out = append(out, c.Pods(pods)...)
	if fl == nil {
		out = append(out, c.Gone(leases, pods)...)
	}
	return out
}

// FencedLease observes the FencedLease: status.fencingToken never goes down.
func (c *Checker) FencedLease(fl *fencingv1.FencedLease) []string {
	var out []string
	if fl.Status.FencingToken < c.statusToken {
		out = append(out, fmt.Sprintf("status.fencingToken went down from %d to %d", c.statusToken, fl.Status.FencingToken))
	}
	c.statusToken = max(c.statusToken, fl.Status.FencingToken)
	c.holders = max(c.holders, fl.Spec.Holders, 1)
	return out
}

// SpecHolders observes spec.holders as n, where no FencedLease is read (a replayed
// history).
func (c *Checker) SpecHolders(n int32) { c.holders = max(c.holders, n, 1) }

// Lease observes one Lease (one not of this FencedLease is ignored): its token never goes
// down, and the token it grants names one pod.
func (c *Checker) Lease(l *coordinationv1.Lease) []string {
	rec := leaserecord.Read(l)
	if !rec.HasLabel || rec.LeaseLabel != c.name {
		return nil
	}
	var out []string
	if rec.Token < c.leaseTokens[l.Name] {
		out = append(out, fmt.Sprintf("Lease %s: its token went down from %d to %d (holder %q)", l.Name, c.leaseTokens[l.Name], rec.Token, rec.Holder))
	}
	c.leaseTokens[l.Name] = max(c.leaseTokens[l.Name], rec.Token)
	if rec.Holder != "" && rec.HasHolderUID {
		out = append(out, c.tokenNames(rec.Token, rec.HolderUID, "Lease "+l.Name)...)
	}
	return out
}

// Pods observes one read of every pod (the ones not of this FencedLease are ignored): no
// pod is granted twice, a token names one pod, no pod holds again after its grant ended,
// never two pods Holding or Draining in a slot nor more than spec.holders (the largest
// seen) in the FencedLease.
func (c *Checker) Pods(pods []corev1.Pod) []string {
	var out []string
	holding := map[string][]string{} // slot → pods Holding or Draining
	total := 0
	for i := range pods {
		p := &pods[i]
		if p.Labels[fencingv1.LeaseLabel] == c.name {
			c.candidates[p.UID] = true
		}
		if !c.candidates[p.UID] {
			continue // another FencedLease's, or never a candidate
		}
		if _, has := p.Annotations[fencingv1.TokenAnnotation]; has {
			tok := leaserecord.ParseToken(p.Annotations)
			if was, ok := c.podToken[p.UID]; ok && was != tok {
				out = append(out, fmt.Sprintf("pod %s was granted twice: token %d, then %d", p.Name, was, tok))
			}
			c.podToken[p.UID] = tok
			if tok > 0 {
				out = append(out, c.tokenNames(tok, p.UID, "pod "+p.Name)...)
			}
		}
		switch st := grantorder.PodState(p); st {
		case fencingv1.PodReleased, fencingv1.PodRevoked:
			c.ended[p.UID] = true
		case fencingv1.PodHolding, fencingv1.PodDraining:
			if c.ended[p.UID] {
				out = append(out, fmt.Sprintf("pod %s is %s again after its grant ended", p.Name, st))
			}
			slot := p.Annotations[fencingv1.SlotAnnotation]
			holding[slot] = append(holding[slot], p.Name)
			total++
		}
	}
	for _, slot := range slices.Sorted(maps.Keys(holding)) {
		if names := holding[slot]; len(names) > 1 {
			slices.Sort(names)
			out = append(out, fmt.Sprintf("slot %q: pods %v all Holding or Draining", slot, names))
		}
	}
	if c.holders > 0 && int32(total) > c.holders {
		out = append(out, fmt.Sprintf("%d pods Holding or Draining, more than spec.holders %d", total, c.holders))
	}
	return out
}

// Gone observes the Leases and pods read after the FencedLease was seen gone: its
// finalizer went only once no Lease of it names a live grant (D1).
func (c *Checker) Gone(leases []coordinationv1.Lease, pods []corev1.Pod) []string {
	alive := map[types.UID]bool{}
	for i := range pods {
		p := &pods[i]
		alive[p.UID] = p.DeletionTimestamp == nil && !c.ended[p.UID]
	}
	var out []string
	for i := range leases {
		rec := leaserecord.Read(&leases[i])
		if rec.HasLabel && rec.LeaseLabel == c.name && rec.Holder != "" && alive[rec.HolderUID] {
			out = append(out, fmt.Sprintf("the FencedLease is gone while Lease %s names %s with token %d", leases[i].Name, rec.Holder, rec.Token))
		}
	}
	return out
}

// Accepted observes a resource accepting a write with token: a resource never accepts a
// token lower than one it accepted.
func (c *Checker) Accepted(resource string, token int64) []string {
	var out []string
	if was := c.accepted[resource]; token < was {
		out = append(out, fmt.Sprintf("resource %s accepted token %d after token %d", resource, token, was))
	}
	c.accepted[resource] = max(c.accepted[resource], token)
	return out
}

// tokenNames records that token names pod uid, and reports when it named another before.
func (c *Checker) tokenNames(token int64, uid types.UID, where string) []string {
	if was, ok := c.tokenPod[token]; ok && was != uid {
		return []string{fmt.Sprintf("token %d names two pods: %s, then %s on %s", token, was, uid, where)}
	}
	c.tokenPod[token] = uid
	return nil
}
