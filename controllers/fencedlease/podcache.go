package fencedlease

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/grantorder"
)

// podCache follows the labeled pods and keeps each as a cachedPod, not a *corev1.Pod:
// the Pod struct alone is 1,240 bytes, nearly all of it a spec and a status the
// controller never reads, and at 10,000 FencedLeases with 40,000 pods it was 40 % of the
// operator's heap. The controller reads pods only from here (never through the manager's
// cache) and writes them with patches computed between two copies of what is kept, so
// nothing left out is ever written back.
type podCache struct {
	informer toolscache.SharedIndexInformer
}

// podLister lists the pods whose label names a FencedLease, each a copy of the caller's.
type podLister interface {
	forLease(ns, name string) ([]corev1.Pod, error)
}

// podLeaseIndex indexes cached pods by the namespace and FencedLease their label names,
// so a reconcile lists its own pods, not every labeled pod of the namespace: with
// thousands of FencedLeases in one namespace a label-selector list would scan them all,
// on every renewal.
const podLeaseIndex = "fencing.fencedlease.io/lease"

// cachedPod is what the controller reads of a pod: its metadata without managed fields,
// its scheduling gates, its phase and message, and — only when the pod reports that it
// cannot start — the container states and the scheduling condition that say so.
type cachedPod struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Gates []corev1.PodSchedulingGate
	// NodeName is the node the pod is bound to: a Warm standby on a node that cannot
	// run it is passed over.
	NodeName string
	Phase    corev1.PodPhase
	Message  string
	// Stuck holds the init containers and containers waiting for one of
	// cannotStartReasons or restarted (their last exit), Unscheduled the PodScheduled
	// condition when it is False for Unschedulable: both nil for a pod that starts and
	// runs, as nearly all do.
	StuckInit, Stuck []corev1.ContainerStatus
	Unscheduled      *corev1.PodCondition
	// LeaseFound and Admitted are the conditions W2 and W3 set, when the pod has them.
	LeaseFound, Admitted *corev1.PodCondition
}

// DeepCopyObject makes cachedPod a runtime.Object, as the informer and the event handlers
// need.
func (p *cachedPod) DeepCopyObject() runtime.Object {
	out := &cachedPod{TypeMeta: p.TypeMeta, Gates: slices.Clone(p.Gates), NodeName: p.NodeName, Phase: p.Phase, Message: p.Message,
		StuckInit: deepCopyStatuses(p.StuckInit), Stuck: deepCopyStatuses(p.Stuck)}
	if p.Unscheduled != nil {
		out.Unscheduled = p.Unscheduled.DeepCopy()
	}
	if p.LeaseFound != nil {
		out.LeaseFound = p.LeaseFound.DeepCopy()
	}
	if p.Admitted != nil {
		out.Admitted = p.Admitted.DeepCopy()
	}
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

// pod is a *corev1.Pod of the caller's own, holding what the cache keeps.
func (p *cachedPod) pod() corev1.Pod {
	out := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.SchedulingGates = slices.Clone(p.Gates)
	out.Spec.NodeName = p.NodeName
	out.Status.Phase = p.Phase
	out.Status.Message = p.Message
	out.Status.InitContainerStatuses = deepCopyStatuses(p.StuckInit)
	out.Status.ContainerStatuses = deepCopyStatuses(p.Stuck)
	for _, c := range []*corev1.PodCondition{p.Unscheduled, p.LeaseFound, p.Admitted} {
		if c != nil {
			out.Status.Conditions = append(out.Status.Conditions, *c.DeepCopy())
		}
	}
	return out
}

// stuck keeps the statuses that say a container cannot start or run, or restarted, with
// only their name, waiting state, restart count and last exit (what a revocation's
// message reports).
func stuck(statuses []corev1.ContainerStatus) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, c := range statuses {
		w := c.State.Waiting
		waiting := w != nil && grantorder.CannotStartReasons[w.Reason]
		if !waiting && (c.RestartCount == 0 || c.LastTerminationState.Terminated == nil) {
			continue
		}
		kept := corev1.ContainerStatus{Name: c.Name, RestartCount: c.RestartCount}
		if waiting {
			kept.State.Waiting = w.DeepCopy()
		}
		if t := c.LastTerminationState.Terminated; t != nil {
			kept.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: t.Reason, ExitCode: t.ExitCode}
		}
		out = append(out, kept)
	}
	return out
}

func deepCopyStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if in == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// compactPod is the informer's transform: a pod becomes a cachedPod before it is stored
// or handed to a handler. Anything else (a tombstone, or an object already compacted)
// passes through.
func compactPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	c := &cachedPod{ObjectMeta: p.ObjectMeta, Gates: p.Spec.SchedulingGates, NodeName: p.Spec.NodeName, Phase: p.Status.Phase, Message: p.Status.Message,
		StuckInit: stuck(p.Status.InitContainerStatuses), Stuck: stuck(p.Status.ContainerStatuses)}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
			c.Unscheduled = cond.DeepCopy()
		}
		if cond.Type == fencingv1.LeaseFoundCondition {
			c.LeaseFound = cond.DeepCopy()
		}
		if cond.Type == fencingv1.AdmittedCondition {
			c.Admitted = cond.DeepCopy()
		}
	}
	c.ManagedFields = nil
	return c, nil
}

// newPodCache watches the pods that carry the lease label, in every namespace, over the
// manager's connection, in protobuf.
func newPodCache(cfg *rest.Config, hc *http.Client) (*podCache, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	pods, err := corev1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("pod client: %w", err)
	}
	labeled := func(o *metav1.ListOptions) { o.LabelSelector = fencingv1.LeaseLabel }
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			labeled(&o)
			return pods.Pods(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			labeled(&o)
			return pods.Pods(metav1.NamespaceAll).Watch(ctx, o)
		},
	}
	informer := toolscache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, toolscache.SharedIndexInformerOptions{
		Indexers: toolscache.Indexers{podLeaseIndex: indexByLease},
	})
	if err := informer.SetTransform(compactPod); err != nil {
		return nil, err
	}
	return &podCache{informer: informer}, nil
}

// indexByLease keys a pod by namespace and the FencedLease its label names.
func indexByLease(obj any) ([]string, error) {
	p, ok := obj.(*cachedPod)
	if !ok {
		return nil, nil
	}
	if name := p.Labels[fencingv1.LeaseLabel]; name != "" {
		return []string{p.Namespace + "/" + name}, nil
	}
	return nil, nil
}

// forLease lists the cached pods whose label names FencedLease ns/name, as pods of the
// caller's own.
func (c *podCache) forLease(ns, name string) ([]corev1.Pod, error) {
	objs, err := c.informer.GetIndexer().ByIndex(podLeaseIndex, ns+"/"+name)
	if err != nil {
		return nil, err
	}
	out := make([]corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*cachedPod); ok {
			out = append(out, p.pod())
		}
	}
	return out, nil
}

// Start runs the informer until the manager stops. A standby replica runs it too, so it
// takes over with a warm cache, as with the manager's own informers.
func (c *podCache) Start(ctx context.Context) error {
	c.informer.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection is false: see Start.
func (c *podCache) NeedLeaderElection() bool { return false }

// source feeds the controller with pod events; the controller starts its workers only
// once the cache has synced, so no reconcile sees a partial set of pods.
func (c *podCache) source(h handler.EventHandler) source.Source {
	return &syncedInformer{Informer: source.Informer{Informer: c.informer, Handler: h}, synced: c.informer.HasSynced}
}

type syncedInformer struct {
	source.Informer
	synced toolscache.InformerSynced
}

// WaitForSync makes the source a SyncingSource.
func (s *syncedInformer) WaitForSync(ctx context.Context) error {
	if !toolscache.WaitForCacheSync(ctx.Done(), s.synced) {
		return fmt.Errorf("pod cache did not sync: %w", ctx.Err())
	}
	return nil
}

var (
	_ podLister                      = &podCache{}
	_ manager.LeaderElectionRunnable = &podCache{}
	_ source.SyncingSource           = &syncedInformer{}
)
