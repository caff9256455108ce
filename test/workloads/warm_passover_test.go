package workloads

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

var _ = Describe("Warm standbys that cannot take over are passed over (issue 47, item 1)", func() {
	// on is a Warm candidate scheduled onto node.
	on := func(ns, name, node string) *corev1.Pod {
		p := pod(ns, name)
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
		return p
	}
	// setUp: a holds token 1 on the first node; old, on the second node, is the oldest
	// standby; young, on the first node, the youngest.
	setUp := func() (string, *warmHolders) {
		GinkgoHelper()
		ns := newNamespace()
		createWarmFL(ns)
		hs := startWarmHolders(ns)
		Expect(k8s.Create(ctx, on(ns, "a", cl.Nodes[0]))).To(Succeed())
		expectWarmHolder(ns, hs, 1, "example.invalid/work")
		Expect(k8s.Create(ctx, on(ns, "old", cl.Nodes[1]))).To(Succeed())
		time.Sleep(1100 * time.Millisecond) // creation times count in seconds
		Expect(k8s.Create(ctx, on(ns, "young", cl.Nodes[0]))).To(Succeed())
		Eventually(func(g Gomega) {
			for _, name := range []string{"old", "young"} {
				g.Expect(get(g, ns, name).Status.Phase).To(Equal(corev1.PodRunning))
			}
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		return ns, hs
	}
	expectGrantedYoung := func(ns string, hs *warmHolders) {
		GinkgoHelper()
		Expect(k8s.Delete(ctx, get(Default, ns, "a"))).To(Succeed())
		Eventually(func(g Gomega) {
			fl := getFL(g, ns)
			g.Expect(fl.Status.Holder).NotTo(BeNil())
			g.Expect(fl.Status.Holder.Token).To(BeEquivalentTo(2))
			g.Expect(fl.Status.Holder.PodName).To(Equal("young"), "the older standby's node cannot run it")
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Eventually(hs.workingTokens).WithTimeout(timeout).WithPolling(poll).Should(ContainElement(BeEquivalentTo(2)))
		Expect(get(Default, ns, "old").Annotations).NotTo(HaveKey(fencingv1.TokenAnnotation))
	}

	It("grants the younger standby when the older one's node is cordoned (a drain is coming)", func() {
		ns, hs := setUp()
		cordon(cl.Nodes[1])
		expectGrantedYoung(ns, hs)
	})

	It("grants the younger standby when the older one's node is lost (NotReady)", func() {
		ns, hs := setUp()
		restart, err := cl.StopNode(cl.Nodes[1])
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(restart)
		Eventually(func(g Gomega) {
			n := &corev1.Node{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: cl.Nodes[1]}, n)).To(Succeed())
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					g.Expect(c.Status).NotTo(Equal(corev1.ConditionTrue))
				}
			}
		}).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())
		expectGrantedYoung(ns, hs)
	})
})
