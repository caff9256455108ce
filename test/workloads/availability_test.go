package workloads

import (
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlease/fencedlease/test/testenv"
)

// The operator's own Deployment as dist/install.yaml ships it, on the kwok nodes: while no
// replica leads nothing is granted or revoked (and before Kubernetes 1.36 no candidate is
// admitted), so a drain must never leave it without a replica.
var _ = Describe("Operator availability (issue 11)", func() {
	It("runs the two replicas on two nodes, and a drain evicts one of them but never the last", func() {
		objs, err := testenv.BundleObjects()
		Expect(err).NotTo(HaveOccurred())
		var deploy *appsv1.Deployment
		for _, o := range objs {
			// The namespace is there: the suite installed the candidate admission into it.
			if !slices.Contains([]string{"ServiceAccount", "Deployment", "PodDisruptionBudget"}, o.GetKind()) {
				continue
			}
			Expect(k8s.Create(ctx, o)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
			if o.GetKind() == "Deployment" {
				deploy = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: o.GetName()}}
			}
		}
		Expect(deploy).NotTo(BeNil(), "the bundle has the operator's Deployment")
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, deploy))).To(Succeed()) })
		ns := deploy.Namespace

		replicas := func(g Gomega) []corev1.Pod {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"control-plane": "controller-manager"})).To(Succeed())
			return slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
		}
		By("both replicas run, on different nodes, at system-cluster-critical priority")
		var running []corev1.Pod
		Eventually(func(g Gomega) {
			running = replicas(g)
			g.Expect(running).To(HaveLen(2))
			for _, p := range running {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
				g.Expect(p.Spec.PriorityClassName).To(Equal("system-cluster-critical"))
			}
			g.Expect(running[0].Spec.NodeName).NotTo(Equal(running[1].Spec.NodeName))
			pdb := &policyv1.PodDisruptionBudget{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fencedlease-controller-manager"}, pdb)).To(Succeed())
			g.Expect(pdb.Status.DisruptionsAllowed).To(BeEquivalentTo(1))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		By("draining the first replica's node: cordon, evict — allowed")
		first, second := running[0], running[1]
		cordon(first.Spec.NodeName)
		Expect(evict(&first)).To(Succeed())

		By("its replacement cannot share the second node, so it waits; evicting the second replica is refused")
		Eventually(func(g Gomega) {
			var pending int
			for _, p := range replicas(g) {
				if p.Spec.NodeName == "" {
					pending++
				}
			}
			g.Expect(pending).To(Equal(1))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			err := evict(&second)
			g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "eviction of the last replica: %v", err)
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(get(g, ns, second.Name).DeletionTimestamp).To(BeNil())
		}).WithTimeout(2 * time.Second).WithPolling(poll).Should(Succeed())
	})
})

// cordon marks a node unschedulable, as kubectl drain does first, until the spec ends.
func cordon(node string) {
	GinkgoHelper()
	set := func(v bool) error {
		n := &corev1.Node{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		patch := client.MergeFrom(n.DeepCopy())
		n.Spec.Unschedulable = v
		return k8s.Patch(ctx, n, patch)
	}
	Expect(set(true)).To(Succeed())
	DeferCleanup(func() { Expect(set(false)).To(Succeed()) })
}

// evict asks for the pod's eviction, as kubectl drain does; the API server checks the
// pod's disruption budget.
func evict(p *corev1.Pod) error {
	return k8s.SubResource("eviction").Create(ctx, p, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}})
}
