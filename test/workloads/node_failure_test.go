package workloads

import (
	"context"
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/fence"
)

var _ = Describe("Node failure (issue 8, section 3)", func() {
	It("grants the waiting pod token+1 on the other node after the lease; the old pod stays Terminating on the dead node and its token is refused", func() {
		const lease = 3 * time.Second
		ns := newNamespace()
		Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 3, StartupDeadlineSeconds: 30}})).To(Succeed())
		labels := map[string]string{fencingv1.LeaseLabel: "invoices", "app": "scheduler"}
		Expect(k8s.Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scheduler"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: "scheduler", Image: "example.invalid/scheduler"}},
						// One replica a node, so the survivor lands on the live node.
						Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
							RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
								LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: "kubernetes.io/hostname"}}}},
					},
				},
			},
		})).To(Succeed())

		a := startAgents(ns)

		By("one replica holds token 1 and runs on a node; the other waits, gated")
		var holder *corev1.Pod
		Eventually(func(g Gomega) {
			fl := getFL(g, ns)
			g.Expect(fl.Status.Holder).NotTo(BeNil())
			g.Expect(fl.Status.Holder.FirstRenewTime).NotTo(BeNil(), "the agent renewed")
			holder = get(g, ns, fl.Status.Holder.PodName)
			g.Expect(holder.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(fl.Status.Waiting).To(BeEquivalentTo(1))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		deadNode := holder.Spec.NodeName

		By("the holder's node dies")
		a.kill(deadNode)
		restart, err := cl.StopNode(deadNode)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(restart()).To(Succeed()) })

		By("the other replica is granted token 2 after the lease, lands on the live node and runs")
		var successor *corev1.Pod
		var granted time.Time
		Eventually(func(g Gomega) {
			fl := getFL(g, ns)
			g.Expect(fl.Status.Holder).NotTo(BeNil())
			g.Expect(fl.Status.Holder.Token).To(BeEquivalentTo(2))
			granted = fl.Status.Holder.AcquireTime.Time
			successor = get(g, ns, fl.Status.Holder.PodName)
			g.Expect(successor.Spec.NodeName).NotTo(BeEmpty())
			g.Expect(successor.Spec.NodeName).NotTo(Equal(deadNode))
			g.Expect(successor.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		failover := granted.Sub(a.lastRenewal(holder.Name))
		Expect(failover).To(BeNumerically(">=", lease-100*time.Millisecond), "granted before the dead holder's lease ran out")
		GinkgoWriter.Printf("node failure: last renewal → next grant %v (lease %v)\n", failover, lease)

		By("the dead node's pod: revoked and deleted, but no kubelet confirms it stopped, so it stays Terminating")
		Consistently(func(g Gomega) {
			p := get(g, ns, holder.Name)
			g.Expect(p.DeletionTimestamp).NotTo(BeNil())
			g.Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodRevoked)))
		}).WithTimeout(2 * time.Second).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			n := &corev1.Node{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: deadNode}, n)).To(Succeed())
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					g.Expect(c.Status).NotTo(Equal(corev1.ConditionTrue))
				}
			}
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "the node lifecycle controller marks the silent node not Ready")

		By("if that pod still runs behind the partition, its writes carry token 1 and the resource refuses them")
		store := &fence.MemoryStore{}
		Expect(store.Do(ctx, "invoices/tenant-7", 2, func(context.Context) error { return nil })).To(Succeed())
		err = store.Do(ctx, "invoices/tenant-7", 1, func(context.Context) error { return nil })
		Expect(errors.Is(err, fence.ErrStaleToken)).To(BeTrue(), "got %v", err)
	})
})
