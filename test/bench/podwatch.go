package bench

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// podWatch records when each pod was first seen granted on the pod itself: a token, no
// scheduling gate left. That is when a Cold pod can start — the scheduler may bind it,
// and FENCING_TOKEN resolves — which the Lease naming it does not show (the holders here
// start on the Lease, as a Warm standby does).
type podWatch struct {
	mu      sync.Mutex
	ungated map[string]time.Time
}

func watchPods(ctx context.Context, cs kubernetes.Interface) *podWatch {
	w := &podWatch{ungated: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.saw(o.(*corev1.Pod)) },
		UpdateFunc: func(_, o any) { w.saw(o.(*corev1.Pod)) },
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return w
}

func (w *podWatch) saw(p *corev1.Pod) {
	if _, granted := p.Annotations[fencingv1.TokenAnnotation]; !granted || len(p.Spec.SchedulingGates) > 0 {
		return
	}
	now := time.Now()
	key := p.Namespace + "/" + p.Name
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.ungated[key]; !seen {
		w.ungated[key] = now
	}
}

// lastUngated is when the last of pods ns/names was first seen granted on the pod; zero
// with the count missing when some never were.
func (w *podWatch) lastUngated(ns string, names []string) (last time.Time, missing int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range names {
		at, ok := w.ungated[ns+"/"+n]
		switch {
		case !ok:
			missing++
		case at.After(last):
			last = at
		}
	}
	return last, missing
}

// awaitUngated waits up to limit for every pod ns/names to be seen granted on the pod, and
// returns lastUngated.
func (w *podWatch) awaitUngated(ns string, names []string, limit time.Duration) (time.Time, int) {
	deadline := time.Now().Add(limit)
	for {
		last, missing := w.lastUngated(ns, names)
		if missing == 0 || time.Now().After(deadline) {
			return last, missing
		}
		time.Sleep(100 * time.Millisecond)
	}
}
