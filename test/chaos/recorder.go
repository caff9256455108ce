package chaos

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
	"github.com/fencedlease/fencedlease/test/invariants"
)

// Recorder follows the pods' states and the Lease's renewals with watches, and the
// FencedLease's revocations by polling its status: the History's States, Renewals and
// Revocations of one FencedLease, on envtest or on real nodes. At every event it observes
// (and every poll of the FencedLease) it checks the protocol's invariants
// (test/invariants) on the objects as it saw them: the History's Invariants.
type Recorder struct {
	mu          sync.Mutex
	states      []StateChange
	renewals    []Renewal
	revocations []Revocation
	lastState   map[string]string // pod UID → last state recorded
	pods        map[types.UID]corev1.Pod
	checker     *invariants.Checker
	broken      []string
}

// Record starts recording the FencedLease ns/lease until ctx ends.
func Record(ctx context.Context, cs *kubernetes.Clientset, c client.Client, ns, lease string) *Recorder {
	r := newRecorder(lease)
	go follow(ctx, func(ctx context.Context, rv string) (watch.Interface, error) {
		if rv == "" {
			// A fresh start: pods deleted while no watch ran are gone from the list.
			list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			r.relisted(list.Items)
			rv = list.ResourceVersion
		}
		return cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	}, func(ev watch.Event) { r.pod(ev.Object, ev.Type == watch.Deleted) })
	go follow(ctx, func(ctx context.Context, rv string) (watch.Interface, error) {
		return cs.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	}, func(ev watch.Event) { r.lease(ev.Object, lease) })
	go r.pollRevocations(ctx, c, ns, lease)
	return r
}

func newRecorder(lease string) *Recorder {
	return &Recorder{lastState: map[string]string{}, pods: map[types.UID]corev1.Pod{}, checker: invariants.New(lease)}
}

// follow watches from where it left off and re-watches within 50 ms of any break (an
// informer backs off for up to 30 s after repeated failures, and would miss the very
// moments a fault makes interesting). A resourceVersion too old to resume from starts a
// fresh watch, whose initial events re-state every object.
func follow(ctx context.Context, start func(context.Context, string) (watch.Interface, error), on func(watch.Event)) {
	rv := ""
	for ctx.Err() == nil {
		w, err := start(ctx, rv)
		if err != nil {
			if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
				rv = ""
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if st, ok := ev.Object.(*metav1.Status); ok && st.Code == http.StatusGone {
					rv = ""
				}
				break
			}
			if m, err := meta.Accessor(ev.Object); err == nil {
				rv = m.GetResourceVersion()
			}
			if ev.Type != watch.Bookmark {
				on(ev)
			}
		}
		w.Stop()
	}
}

func (r *Recorder) pod(o runtime.Object, deleted bool) {
	if p, ok := o.(*corev1.Pod); ok {
		r.record(p, deleted, true)
	}
}

// record records pod p's state when it changed, and checks the invariants on every pod
// the watch shows now when observe is set.
func (r *Recorder) record(p *corev1.Pod, deleted, observe bool) {
	state := p.Annotations[fencingv1.StateAnnotation]
	if deleted {
		state = ""
	}
	token, _ := strconv.ParseInt(p.Annotations[fencingv1.TokenAnnotation], 10, 64)
	slot, _ := strconv.ParseInt(p.Annotations[fencingv1.SlotAnnotation], 10, 32)
	r.mu.Lock()
	defer r.mu.Unlock()
	if deleted {
		delete(r.pods, p.UID)
	} else {
		r.pods[p.UID] = *p.DeepCopy()
	}
	if observe {
		r.observePods()
	}
	if prev, seen := r.lastState[string(p.UID)]; seen && prev == state {
		return
	}
	r.lastState[string(p.UID)] = state
	r.states = append(r.states, StateChange{At: time.Now(), Pod: p.Name, UID: p.UID, State: state, Token: token, Slot: int32(slot)})
}

// relisted records the pods of a fresh list, and every pod seen before that is not in it
// as deleted; the invariants are checked once, on the list.
func (r *Recorder) relisted(pods []corev1.Pod) {
	present := map[string]bool{}
	for i := range pods {
		present[string(pods[i].UID)] = true
		r.record(&pods[i], false, false)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid := range r.pods {
		if !present[string(uid)] {
			delete(r.pods, uid)
		}
	}
	r.observePods()
	for uid, state := range r.lastState {
		if !present[uid] && state != "" {
			r.lastState[uid] = ""
			r.states = append(r.states, StateChange{At: time.Now(), UID: types.UID(uid), State: ""})
		}
	}
}

func (r *Recorder) lease(o runtime.Object, name string) {
	l, ok := o.(*coordinationv1.Lease)
	if !ok {
		return
	}
	r.mu.Lock()
	r.broke(r.checker.Lease(l))
	r.mu.Unlock()
	rec := leaserecord.Read(l)
	if rec.LeaseLabel != name || rec.Holder == "" || rec.RenewTime == nil {
		return // not one of the FencedLease's (slot 0's is its name, slot k's name-slot-k)
	}
	if !rec.Renewed() {
		return // the operator's grant, not yet renewed by its holder
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.renewals = append(r.renewals, Renewal{Pod: rec.Holder, Token: rec.Token, At: rec.RenewTime.Time, Slot: rec.Slot})
}

func (r *Recorder) pollRevocations(ctx context.Context, c client.Client, ns, name string) {
	var last int64
	seen := map[int64]bool{} // by token: each slot's last revocation, once
	for ctx.Err() == nil {
		fl := &fencingv1.FencedLease{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, fl)
		r.observeFencedLease(ctx, c, ns, fl, err)
		if err == nil && fl.Status.Revocations != last {
			if rv := fl.Status.LastRevocation; rv != nil {
				r.mu.Lock()
				r.revocations = append(r.revocations, Revocation{Pod: rv.PodName, Token: rv.Token, Reason: string(rv.Reason), At: rv.Time.Time})
				r.mu.Unlock()
			}
			for _, s := range fl.Status.Slots {
				if rv := s.LastRevocation; rv != nil && !seen[rv.Token] {
					seen[rv.Token] = true
					r.mu.Lock()
					r.revocations = append(r.revocations, Revocation{Pod: rv.PodName, Token: rv.Token, Reason: string(rv.Reason), At: rv.Time.Time, Slot: s.Slot})
					r.mu.Unlock()
				}
			}
			last = fl.Status.Revocations
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// observePods checks the invariants on every pod as the pod watch shows them after its
// last event: one watch's events come in the order they happened, so the set is one the
// API server held.
func (r *Recorder) observePods() {
	pods := make([]corev1.Pod, 0, len(r.pods))
	for _, q := range r.pods {
		pods = append(pods, q)
	}
	r.broke(r.checker.Pods(pods))
}

// broke records the invariants an observation broke, with when.
func (r *Recorder) broke(violations []string) {
	for _, v := range violations {
		r.broken = append(r.broken, time.Now().Format(time.RFC3339Nano)+": "+v)
	}
}

// observeFencedLease checks the invariants on the FencedLease of namespace ns as read (err
// its read's error); once it is gone, on its Leases and pods listed after that (D1).
func (r *Recorder) observeFencedLease(ctx context.Context, c client.Client, ns string, fl *fencingv1.FencedLease, err error) {
	switch {
	case err == nil:
		r.mu.Lock()
		r.broke(r.checker.FencedLease(fl))
		r.mu.Unlock()
	case apierrors.IsNotFound(err):
		leases, pods := &coordinationv1.LeaseList{}, &corev1.PodList{}
		if c.List(ctx, leases, client.InNamespace(ns)) == nil && c.List(ctx, pods, client.InNamespace(ns)) == nil {
			r.mu.Lock()
			r.broke(r.checker.Gone(leases.Items, pods.Items))
			r.mu.Unlock()
		}
	}
}

// Into adds what was recorded so far to h.
func (r *Recorder) Into(h *History) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h.Invariants = append(h.Invariants, r.broken...)
	h.States = append(h.States, r.states...)
	h.Renewals = append(h.Renewals, r.renewals...)
	h.Revocations = append(h.Revocations, r.revocations...)
}
