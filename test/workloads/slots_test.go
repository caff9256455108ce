package workloads

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/fence"
)

// slotHolders is who holds each slot of ns's FencedLease "invoices", as "pod/token" —
// only slots whose holder's pod runs and has renewed.
func slotHolders(g Gomega, ns string) map[int32]string {
	fl := getFL(g, ns)
	out := map[int32]string{}
	for _, s := range fl.Status.Slots {
		if h := s.Holder; h != nil && h.FirstRenewTime != nil && get(g, ns, h.PodName).Status.Phase == corev1.PodRunning {
			out[s.Slot] = h.PodName + "/" + strconv.FormatInt(h.Token, 10)
		}
	}
	return out
}

func createSlots(ns string, spec fencingv1.FencedLeaseSpec) {
	GinkgoHelper()
	Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"}, Spec: spec})).To(Succeed())
}

func setHolders(ns string, n int32) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fl := getFL(Default, ns)
		fl.Spec.Holders = n
		return k8s.Update(ctx, fl)
	})).To(Succeed())
}

var _ = Describe("Slots on real workload controllers (issue 49)", func() {
	It("maps a StatefulSet's ordinals to slots (Ordinal), through a rolling update: each pod waits for its own slot", func() {
		ns := newNamespace()
		createSlots(ns, fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 3, StartupDeadlineSeconds: 30, Holders: 3,
			SlotAssignment: fencingv1.SlotAssignmentOrdinal})
		startAgents(ns)
		s := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shard"},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](3), ServiceName: "shard", PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector: &metav1.LabelSelector{MatchLabels: template("").Labels}, Template: template("example.invalid/shard:v1"),
			},
		}
		Expect(k8s.Create(ctx, s)).To(Succeed())
		Eventually(func(g Gomega) {
			held := slotHolders(g, ns)
			g.Expect(held).To(HaveLen(3))
			for slot, h := range held {
				g.Expect(h).To(HavePrefix(fmt.Sprintf("shard-%d/", slot)), "slot %d is shard-%d's", slot, slot)
			}
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		By("rolling to v2: each ordinal is replaced, and its new pod takes its slot, never another's")
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
				return err
			}
			s.Spec.Template.Spec.Containers[0].Image = "example.invalid/shard:v2"
			return k8s.Update(ctx, s)
		})).To(Succeed())
		Eventually(func(g Gomega) {
			held := slotHolders(g, ns)
			g.Expect(held).To(HaveLen(3))
			for slot := range int32(3) {
				name := fmt.Sprintf("shard-%d", slot)
				g.Expect(held[slot]).To(HavePrefix(name+"/"), "slot %d", slot)
				p := get(g, ns, name)
				g.Expect(p.Spec.Containers[0].Image).To(Equal("example.invalid/shard:v2"))
				g.Expect(p.Labels).To(HaveKeyWithValue(fencingv1.SlotLabel, strconv.Itoa(int(slot))))
			}
		}).WithTimeout(2 * timeout).WithPolling(poll).Should(Succeed())
		fl := getFL(Default, ns)
		Expect(fl.Status.FencingToken).To(BeNumerically(">=", 6), "three grants, then three more")
		Expect(fl.Status.Transitions).To(BeEquivalentTo(fl.Status.FencingToken))
	})

	It("fails over both slots of a node that dies at once, to the standbys on the other node", func() {
		ns := newNamespace()
		createSlots(ns, fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 3, StartupDeadlineSeconds: 30, Holders: 2})
		a := startAgents(ns)
		var nodes corev1.NodeList
		Expect(k8s.List(ctx, &nodes)).To(Succeed())
		Expect(len(nodes.Items)).To(BeNumerically(">=", 2))
		deadNode, liveNode := nodes.Items[0].Name, nodes.Items[1].Name
		on := func(name, node string) {
			p := pod(ns, name)
			p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
			Expect(k8s.Create(ctx, p)).To(Succeed())
		}
		on("a", deadNode)
		on("b", deadNode)
		Eventually(func(g Gomega) { g.Expect(slotHolders(g, ns)).To(Equal(map[int32]string{0: "a/1", 1: "b/2"})) }).
			WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		on("c", liveNode)
		on("d", liveNode)

		By("the node of both holders dies")
		a.kill(deadNode)
		restart, err := cl.StopNode(deadNode)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(restart()).To(Succeed()) })

		By("each slot is granted a standby on the live node after its lease, with a token above both dead ones")
		Eventually(func(g Gomega) {
			held := slotHolders(g, ns)
			g.Expect(held).To(HaveLen(2))
			g.Expect([]string{held[0], held[1]}).To(ConsistOf("c/3", "d/4"))
			for _, name := range []string{"c", "d"} {
				g.Expect(get(g, ns, name).Spec.NodeName).To(Equal(liveNode))
			}
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		fl := getFL(Default, ns)
		for _, s := range fl.Status.Slots {
			Expect(s.LastRevocation).NotTo(BeNil(), "slot %d", s.Slot)
			Expect(s.LastRevocation.Reason).To(Equal(fencingv1.ReasonLeaseExpired))
		}

		By("a dead holder that still runs behind the partition writes to its shard with its old token: refused per slot")
		store := &fence.MemoryStore{}
		noop := func(context.Context) error { return nil }
		for _, s := range fl.Status.Slots {
			Expect(store.Do(ctx, fence.ForSlot("invoices", s.Slot), s.Holder.Token, noop)).To(Succeed())
			err := store.Do(ctx, fence.ForSlot("invoices", s.Slot), s.LastRevocation.Token, noop)
			Expect(errors.Is(err, fence.ErrStaleToken)).To(BeTrue(), "slot %d: %v", s.Slot, err)
		}
	})

	It("scales holders up and down under churn: never two holders in a slot, never more than the holders asked for", func() {
		ns := newNamespace()
		createSlots(ns, fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 2, StartupDeadlineSeconds: 30, Holders: 2,
			HandoffGracePeriodSeconds: 1})
		startAgents(ns)
		labels := template("").Labels
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shard"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](6), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: template("example.invalid/shard:v1")},
		}
		Expect(k8s.Create(ctx, d)).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(slotHolders(g, ns)).To(HaveLen(2)) }).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		By("deleting a holder now and then while holders goes 2 → 4 → 1 → 3")
		churn, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			for churn.Err() == nil {
				fl := &fencingv1.FencedLease{}
				if k8s.Get(churn, client.ObjectKey{Namespace: ns, Name: "invoices"}, fl) == nil {
					var held []string
					for _, s := range fl.Status.Slots {
						if s.Holder != nil {
							held = append(held, s.Holder.PodName)
						}
					}
					if len(held) > 0 {
						victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: held[rand.IntN(len(held))]}}
						_ = k8s.Delete(churn, victim, client.GracePeriodSeconds(0))
					}
				}
				select {
				case <-churn.Done():
				case <-time.After(1500 * time.Millisecond):
				}
			}
		}()
		for _, n := range []int32{4, 1, 3} {
			setHolders(ns, n)
			Eventually(func(g Gomega) {
				fl := getFL(g, ns)
				g.Expect(fl.Status.Slots).To(HaveLen(int(n)), "the removed slots drained")
				// Every slot held at the new size (by a pod that renewed), under churn.
				g.Expect(slotHolders(g, ns)).To(HaveLen(int(n)))
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		}
		stop()
		<-done

		By("without churn, every slot is held by its own running pod, each token once")
		Eventually(func(g Gomega) {
			held := slotHolders(g, ns)
			g.Expect(held).To(HaveLen(3))
			seen := map[string]bool{}
			for _, h := range held {
				g.Expect(seen[h]).To(BeFalse(), "%s holds two slots", h)
				seen[h] = true
			}
			g.Expect(getFL(g, ns).Status.Holding).To(Equal("3/3"))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})
})
