package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// GrantWatcher is the oracle every spec that grants runs: it follows a namespace's pods
// as they change and records a violation whenever two pods are marked Holding at once in
// one slot of one FencedLease (a FencedLease without slots has one), or more pods of a
// FencedLease than its spec.holders ever allowed, or a pod becomes Holding with a token
// not above every token its slot had before, or a token of a FencedLease is held by two
// pods, or two pods carry the holder label at once in one slot, or a pod carries it
// without being marked Holding (or the slot label of another slot). A pod Draining
// (asked to hand off) still holds its grant and counts as Holding.
//
// It cannot go blind: a watch that ends (an API-server restart, a timeout) is resumed
// from the last resourceVersion seen within 50 ms, as the chaos recorder does; one too
// old to resume from is replaced by a fresh list, whose pods are judged as events. Stop
// fails when the oracle had no watch open at the end.
type GrantWatcher struct {
	c      client.WithWatch
	ns     string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	holding    map[string]grantSeen // pod name → its grant
	labeled    map[string]grantKey  // pods with the holder label → their slot
	tokens     []int64
	lastToken  map[grantKey]int64  // per slot, the last token that became Holding
	tokenPod   map[tokenKey]string // per FencedLease and token, the pod that held it
	maxHolders map[string]int32    // per FencedLease, the largest spec.holders seen
	violations []string
	watching   bool // a watch is open now
	resumes    int  // watches re-established after one ended
	relists    int  // fresh lists after a resourceVersion was too old

	stopOnce sync.Once
	result   []int64
	err      error
}

// WatchGrants starts watching the pods of ns.
func WatchGrants(ctx context.Context, c client.WithWatch, ns string) (*GrantWatcher, error) {
	gw := &GrantWatcher{c: c, ns: ns, done: make(chan struct{}), holding: map[string]grantSeen{}, labeled: map[string]grantKey{},
		lastToken: map[grantKey]int64{}, tokenPod: map[tokenKey]string{}, maxHolders: map[string]int32{}}
	gw.ctx, gw.cancel = context.WithCancel(ctx)
	w, err := c.Watch(gw.ctx, &corev1.PodList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{AllowWatchBookmarks: true}})
	if err != nil {
		gw.cancel()
		return nil, err
	}
	go gw.follow(w)
	return gw, nil
}

// follow judges every event, and re-watches from where it left off whenever a watch ends.
func (gw *GrantWatcher) follow(w watch.Interface) {
	defer close(gw.done)
	rv := ""
	for {
		gw.setWatching(true)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if st, ok := ev.Object.(*metav1.Status); ok && st.Code == http.StatusGone {
					rv = ""
				}
				break
			}
			if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
				rv = m.GetResourceVersion()
			}
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Bookmark {
				gw.judge(p, ev.Type == watch.Deleted)
			}
		}
		w.Stop()
		gw.setWatching(false)
		for {
			if gw.ctx.Err() != nil {
				return
			}
			var err error
			if w, rv, err = gw.rewatch(rv); err == nil {
				break
			}
			if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
				rv = ""
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// rewatch resumes from rv, or lists afresh when rv is empty (too old to resume from):
// the listed pods are judged as the state they are in now.
func (gw *GrantWatcher) rewatch(rv string) (watch.Interface, string, error) {
	if rv == "" {
		var list corev1.PodList
		if err := gw.c.List(gw.ctx, &list, client.InNamespace(gw.ns)); err != nil {
			return nil, "", err
		}
		gw.relisted(list.Items)
		rv = list.ResourceVersion
	}
	w, err := gw.c.Watch(gw.ctx, &corev1.PodList{}, client.InNamespace(gw.ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
	if err != nil {
		return nil, rv, err
	}
	gw.mu.Lock()
	gw.resumes++
	gw.mu.Unlock()
	return w, rv, nil
}

func (gw *GrantWatcher) setWatching(on bool) {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	gw.watching = on
}

// relisted judges a fresh list: pods it no longer shows are gone.
func (gw *GrantWatcher) relisted(pods []corev1.Pod) {
	gw.mu.Lock()
	gw.relists++
	listed := map[string]bool{}
	for i := range pods {
		listed[pods[i].Name] = true
	}
	for name := range gw.holding {
		if !listed[name] {
			delete(gw.holding, name)
		}
	}
	for name := range gw.labeled {
		if !listed[name] {
			delete(gw.labeled, name)
		}
	}
	gw.mu.Unlock()
	for i := range pods {
		gw.judge(&pods[i], false)
	}
}

// grantKey is one slot of one FencedLease: the lease label and the slot annotation (""
// without slots, as slot 0).
type grantKey struct{ lease, slot string }

// tokenKey is one token of one FencedLease.
type tokenKey struct {
	lease string
	token int64
}

// grantSeen is a Holding pod's grant.
type grantSeen struct {
	key   grantKey
	token int64
}

func keyOf(p *corev1.Pod) grantKey {
	slot := p.Annotations[fencingv1.SlotAnnotation]
	if slot == "0" {
		slot = ""
	}
	return grantKey{lease: p.Labels[fencingv1.LeaseLabel], slot: slot}
}

// judge records what pod p's new state means for the grant.
func (gw *GrantWatcher) judge(p *corev1.Pod, deleted bool) {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	prev, was := gw.holding[p.Name]
	gw.judgeLabel(p, deleted)
	if deleted || !holds(p) {
		delete(gw.holding, p.Name)
		return
	}
	token, err := strconv.ParseInt(p.Annotations[fencingv1.TokenAnnotation], 10, 64)
	if err != nil {
		gw.violations = append(gw.violations, fmt.Sprintf("pod %s is Holding with token %q", p.Name, p.Annotations[fencingv1.TokenAnnotation]))
		return
	}
	g := grantSeen{key: keyOf(p), token: token}
	if was && g.key.lease == "" {
		g.key.lease = prev.key.lease // a holder that lost its label still holds where it did
	}
	if was && prev != g {
		gw.violations = append(gw.violations, fmt.Sprintf("pod %s moved from %v to %v while Holding", p.Name, prev, g))
	}
	gw.holding[p.Name] = g
	inSlot, inLease := map[string]int64{}, 0
	for name, other := range gw.holding {
		if other.key == g.key {
			inSlot[name] = other.token
		}
		if other.key.lease == g.key.lease {
			inLease++
		}
	}
	if len(inSlot) > 1 {
		gw.violations = append(gw.violations, fmt.Sprintf("two pods marked Holding at once in %s: %v", describe(g.key), inSlot))
	}
	if was {
		return
	}
	if n := int32(inLease); n > gw.holdersOf(g.key.lease, n) {
		gw.violations = append(gw.violations, fmt.Sprintf("%d pods of FencedLease %s marked Holding at once, above its spec.holders (at most %d)",
			n, g.key.lease, gw.maxHolders[g.key.lease]))
	}
	if last, ok := gw.lastToken[g.key]; ok && token <= last {
		gw.violations = append(gw.violations, fmt.Sprintf("pod %s became Holding in %s with token %d after token %d", p.Name, describe(g.key), token, last))
	}
	gw.lastToken[g.key] = token
	tk := tokenKey{g.key.lease, token}
	if other, ok := gw.tokenPod[tk]; ok && other != p.Name {
		gw.violations = append(gw.violations, fmt.Sprintf("token %d of FencedLease %s held by pod %s and pod %s", token, g.key.lease, other, p.Name))
	}
	gw.tokenPod[tk] = p.Name
	gw.tokens = append(gw.tokens, token)
}

// holdersOf is the largest spec.holders FencedLease lease had while this oracle ran, as
// far as it needs to know: read again only when holding pods reach past it (a raise).
// Called with gw.mu held.
func (gw *GrantWatcher) holdersOf(lease string, holding int32) int32 {
	if n := gw.maxHolders[lease]; holding <= max(n, 1) {
		return max(n, 1)
	}
	fl := &fencingv1.FencedLease{}
	ctx, cancel := context.WithTimeout(gw.ctx, 5*time.Second)
	defer cancel()
	if err := gw.c.Get(ctx, client.ObjectKey{Namespace: gw.ns, Name: lease}, fl); err != nil {
		return holding // cannot tell: no verdict
	}
	gw.maxHolders[lease] = max(gw.maxHolders[lease], fl.Spec.Holders, 1)
	return gw.maxHolders[lease]
}

func describe(k grantKey) string {
	if k.slot == "" {
		return "FencedLease " + k.lease
	}
	return "slot " + k.slot + " of FencedLease " + k.lease
}

// judgeLabel checks the holder label: on one pod at most per slot, on every Holding pod
// and only on one (the operator sets and removes it in the writes that mark the pod),
// with the slot label of the pod's own slot.
func (gw *GrantWatcher) judgeLabel(p *corev1.Pod, deleted bool) {
	if _, has := p.Labels[fencingv1.HolderLabel]; deleted || !has {
		delete(gw.labeled, p.Name)
		if !deleted && holds(p) {
			gw.violations = append(gw.violations, fmt.Sprintf("pod %s is marked Holding without the label %s", p.Name, fencingv1.HolderLabel))
		}
		return
	}
	k := keyOf(p)
	gw.labeled[p.Name] = k
	var same []string
	for name, other := range gw.labeled {
		if other == k {
			same = append(same, name)
		}
	}
	if len(same) > 1 {
		gw.violations = append(gw.violations, fmt.Sprintf("two pods labeled %s at once in %s: %v", fencingv1.HolderLabel, describe(k), same))
	}
	if !holds(p) {
		gw.violations = append(gw.violations, fmt.Sprintf("pod %s is labeled %s but marked %q", p.Name, fencingv1.HolderLabel,
			p.Annotations[fencingv1.StateAnnotation]))
	}
	if slot, labeled := p.Labels[fencingv1.SlotLabel]; labeled && slot != p.Annotations[fencingv1.SlotAnnotation] {
		gw.violations = append(gw.violations, fmt.Sprintf("pod %s is labeled slot %s but holds slot %q", p.Name, slot, p.Annotations[fencingv1.SlotAnnotation]))
	}
}

// Tokens are the tokens seen so far, in the order their pods became Holding.
func (gw *GrantWatcher) Tokens() []int64 {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	return append([]int64(nil), gw.tokens...)
}

// Resumes is how many times the watch was re-established after it ended, and Relists how
// many of those had to list afresh.
func (gw *GrantWatcher) Resumes() (resumes, relists int) {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	return gw.resumes, gw.relists
}

func holds(p *corev1.Pod) bool {
	s := fencingv1.PodState(p.Annotations[fencingv1.StateAnnotation])
	return s == fencingv1.PodHolding || s == fencingv1.PodDraining
}

// Stop ends the watch and returns the tokens in the order their pods became Holding,
// and every violation seen. It fails when no watch was open at the end: the oracle was
// blind then (for 5 s), so its silence proves nothing. Calling it again returns the same.
func (gw *GrantWatcher) Stop() ([]int64, error) {
	gw.stopOnce.Do(gw.stop)
	return gw.result, gw.err
}

func (gw *GrantWatcher) stop() {
	// A watch that just ended (they time out now and then) is back within 50 ms.
	blind := true
	for deadline := time.Now().Add(5 * time.Second); blind && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		gw.mu.Lock()
		blind = !gw.watching
		gw.mu.Unlock()
	}
	gw.cancel()
	<-gw.done
	gw.mu.Lock()
	defer gw.mu.Unlock()
	violations := gw.violations
	if blind {
		violations = append(violations, "the grant oracle had no watch open when it was stopped: it could not re-establish its watch")
	}
	gw.result = gw.tokens
	if len(violations) > 0 {
		gw.err = errors.New(strings.Join(violations, "; "))
	}
}
