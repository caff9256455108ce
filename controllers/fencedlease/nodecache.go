package fencedlease

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/fencedlease/fencedlease/internal/grantorder"
)

// nodeCache follows the nodes, keeping of each only what says whether a standby running
// there can take over a grant: cordoned, unreachable, not Ready. No reconcile waits for
// a node's change; a grant reads the cache when it chooses the next pod.
type nodeCache struct {
	informer toolscache.SharedIndexInformer
}

// nodeJudge says why the node named name cannot take a grant now, or "".
type nodeJudge interface {
	unfit(name string) string
}

func newNodeCache(cfg *rest.Config, hc *http.Client) (*nodeCache, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	nodes, err := corev1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("node client: %w", err)
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return nodes.Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return nodes.Nodes().Watch(ctx, o)
		},
	}
	informer := toolscache.NewSharedIndexInformerWithOptions(lw, &corev1.Node{}, toolscache.SharedIndexInformerOptions{})
	if err := informer.SetTransform(compactNode); err != nil {
		return nil, err
	}
	return &nodeCache{informer: informer}, nil
}

// compactNode keeps a node's name, cordon, unreachable or not-ready taints and Ready
// condition: a node's status (images, addresses, capacity) is kilobytes the controller
// never reads.
func compactNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion},
		Spec: corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable}}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady {
			out.Spec.Taints = append(out.Spec.Taints, corev1.Taint{Key: t.Key, Effect: t.Effect})
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason}}
		}
	}
	return out, nil
}

// unfit: see nodeJudge. A node the synced cache does not know is gone.
func (c *nodeCache) unfit(name string) string {
	obj, exists, err := c.informer.GetStore().GetByKey(name)
	switch {
	case err != nil || !c.informer.HasSynced():
		return ""
	case !exists:
		return fmt.Sprintf("node %s is gone", name)
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return ""
	}
	return grantorder.NodeUnfit(n)
}

// Start runs the informer until the manager stops, on a standby replica too.
func (c *nodeCache) Start(ctx context.Context) error {
	c.informer.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection is false: see Start.
func (c *nodeCache) NeedLeaderElection() bool { return false }

var (
	_ nodeJudge                      = &nodeCache{}
	_ manager.LeaderElectionRunnable = &nodeCache{}
)
