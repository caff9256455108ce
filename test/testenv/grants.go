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
// as they change and records a violation whenever two pods are marked Holding at once,
// or a pod becomes Holding with a token not above every token before it, or two pods
// carry the holder label at once, or a pod carries it without being marked Holding. A
// pod Draining (asked to hand off) still holds its grant and counts as Holding.
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
	holding    map[string]int64 // pod name → token
	labeled    map[string]bool  // pods with the holder label
	tokens     []int64
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
	gw := &GrantWatcher{c: c, ns: ns, done: make(chan struct{}), holding: map[string]int64{}, labeled: map[string]bool{}}
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

// judge records what pod p's new state means for the grant.
func (gw *GrantWatcher) judge(p *corev1.Pod, deleted bool) {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	_, was := gw.holding[p.Name]
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
	gw.holding[p.Name] = token
	if len(gw.holding) > 1 {
		gw.violations = append(gw.violations, fmt.Sprintf("two pods marked Holding at once: %v", gw.holding))
	}
	if !was {
		if n := len(gw.tokens); n > 0 && token <= gw.tokens[n-1] {
			gw.violations = append(gw.violations, fmt.Sprintf("pod %s became Holding with token %d after token %d", p.Name, token, gw.tokens[n-1]))
		}
		gw.tokens = append(gw.tokens, token)
	}
}

// judgeLabel checks the holder label: on one pod at most, on every Holding pod and only
// on one (the operator sets and removes it in the writes that mark the pod).
func (gw *GrantWatcher) judgeLabel(p *corev1.Pod, deleted bool) {
	if _, has := p.Labels[fencingv1.HolderLabel]; deleted || !has {
		delete(gw.labeled, p.Name)
		if !deleted && holds(p) {
			gw.violations = append(gw.violations, fmt.Sprintf("pod %s is marked Holding without the label %s", p.Name, fencingv1.HolderLabel))
		}
		return
	}
	gw.labeled[p.Name] = true
	if len(gw.labeled) > 1 {
		gw.violations = append(gw.violations, fmt.Sprintf("two pods labeled %s at once: %v", fencingv1.HolderLabel, gw.labeled))
	}
	if !holds(p) {
		gw.violations = append(gw.violations, fmt.Sprintf("pod %s is labeled %s but marked %q", p.Name, fencingv1.HolderLabel,
			p.Annotations[fencingv1.StateAnnotation]))
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
