package testenv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// GrantWatcher is the oracle every spec that grants runs: it follows a namespace's pods
// as they change and records a violation whenever two pods are marked Holding at once,
// or a pod becomes Holding with a token not above every token before it. A pod Draining
// (asked to hand off) still holds its grant and counts as Holding.
type GrantWatcher struct {
	w    watch.Interface
	done chan struct{}

	mu         sync.Mutex
	tokens     []int64
	violations []string
}

// WatchGrants starts watching the pods of ns.
func WatchGrants(ctx context.Context, c client.WithWatch, ns string) (*GrantWatcher, error) {
	w, err := c.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns))
	if err != nil {
		return nil, err
	}
	gw := &GrantWatcher{w: w, done: make(chan struct{})}
	go gw.follow()
	return gw, nil
}

func (gw *GrantWatcher) follow() {
	defer close(gw.done)
	holding := map[string]int64{} // pod name → token
	for ev := range gw.w.ResultChan() {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		_, was := holding[p.Name]
		if ev.Type == watch.Deleted || !holds(p) {
			delete(holding, p.Name)
			continue
		}
		token, err := strconv.ParseInt(p.Annotations[fencingv1.TokenAnnotation], 10, 64)
		gw.mu.Lock()
		switch {
		case err != nil:
			gw.violations = append(gw.violations, fmt.Sprintf("pod %s is Holding with token %q", p.Name, p.Annotations[fencingv1.TokenAnnotation]))
		default:
			holding[p.Name] = token
			if len(holding) > 1 {
				gw.violations = append(gw.violations, fmt.Sprintf("two pods marked Holding at once: %v", holding))
			}
			if !was {
				if n := len(gw.tokens); n > 0 && token <= gw.tokens[n-1] {
					gw.violations = append(gw.violations, fmt.Sprintf("pod %s became Holding with token %d after token %d", p.Name, token, gw.tokens[n-1]))
				}
				gw.tokens = append(gw.tokens, token)
			}
		}
		gw.mu.Unlock()
	}
}

func holds(p *corev1.Pod) bool {
	s := fencingv1.PodState(p.Annotations[fencingv1.StateAnnotation])
	return s == fencingv1.PodHolding || s == fencingv1.PodDraining
}

// Stop ends the watch and returns the tokens in the order their pods became Holding,
// and every violation seen.
func (gw *GrantWatcher) Stop() ([]int64, error) {
	gw.w.Stop()
	<-gw.done
	gw.mu.Lock()
	defer gw.mu.Unlock()
	if len(gw.violations) > 0 {
		return gw.tokens, errors.New(strings.Join(gw.violations, "; "))
	}
	return gw.tokens, nil
}
