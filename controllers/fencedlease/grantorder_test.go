package fencedlease

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// GrantOrder's first pod is the one decide grants when the grant ends: oldest first, and
// a hand-off's successor ahead of older pods.
func TestGrantOrderIsDecideOrder(t *testing.T) {
	c, tr, fl, pods, h := grantedRollout(10, 5) // a, b (older revision), n (newer)
	if got := names(GrantOrder(pods, &fl.Status)); got != "b n" {
		t.Fatalf("before the hand-off: %q, want oldest first", got)
	}
	c.Step(time.Second)
	stepHandoff(tr, c, fl, leaseFor(h, t0.Add(time.Second)), pods, &pods[2])
	order := GrantOrder(pods, &fl.Status)
	if got := names(order); got != "n b" {
		t.Fatalf("during the hand-off: %q, want the successor first", got)
	}
	released := leaseFor(h, t0.Add(time.Second))
	released.Spec.HolderIdentity = nil
	if d := stepHandoff(tr, c, fl, released, pods, nil); d.granted() == nil || d.granted().PodUID != order[0].UID {
		t.Fatalf("decide granted %+v, GrantOrder said %s", d.granted(), order[0].Name)
	}
}

func names(pods []*corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return strings.Join(out, " ")
}
