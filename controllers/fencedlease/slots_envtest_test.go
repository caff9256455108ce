package fencedlease_test

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

var _ = Describe("Slots (spec.holders)", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		startController(ns, controllerOpts{id: "ctrl"})
	})

	// N1, N2, N3.
	It("grants each slot to its own pod, oldest first to the lowest slot, with tokens from one counter", func() {
		createSlotsFL(ns, "invoices", 15, 3)
		for _, p := range []string{"a", "b", "c", "d"} {
			createPod(ns, p, "invoices")
		}
		expectSlot(ns, "invoices", 0, "a", 1)
		expectSlot(ns, "invoices", 1, "b", 2)
		expectSlot(ns, "invoices", 2, "c", 3)
		Eventually(func(g Gomega) {
			fl := getFL(ns, "invoices")
			g.Expect(fl.Status.Holding).To(Equal("3/3"))
			g.Expect(fl.Status.Waiting).To(BeEquivalentTo(1))
			g.Expect(fl.Status.FencingToken).To(BeEquivalentTo(3))
			g.Expect(fl.Status.Holder).To(BeNil(), "a FencedLease with slots lists them in status.slots alone")
			expectWaiting(g, ns, "d")
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})

	It("fails over one slot alone: the others keep their holders and tokens", func() {
		createSlotsFL(ns, "invoices", 2, 3)
		for _, p := range []string{"a", "b", "c"} {
			createPod(ns, p, "invoices")
		}
		expectSlot(ns, "invoices", 0, "a", 1)
		expectSlot(ns, "invoices", 1, "b", 2)
		expectSlot(ns, "invoices", 2, "c", 3)
		stop0 := keepRenewing(ns, "invoices", 300*time.Millisecond)
		defer stop0()
		stop2 := keepRenewing(ns, "invoices-slot-2", 300*time.Millisecond)
		defer stop2()
		createPod(ns, "d", "invoices")

		By("slot 1's holder stops renewing: only slot 1 moves on, to the next token")
		expectSlot(ns, "invoices", 1, "d", 4)
		fl := getFL(ns, "invoices")
		Expect(fl.Status.Slots[1].LastRevocation).To(HaveField("PodName", "b"))
		Expect(fl.Status.Revocations).To(BeEquivalentTo(1))
		expectSlot(ns, "invoices", 0, "a", 1)
		expectSlot(ns, "invoices", 2, "c", 3)
	})

	// H6, then H2 and H3 for a removed slot.
	It("drains a removed slot through a hand-off when holders is lowered, and grants it again at once when raised", func() {
		createSlotsFL(ns, "invoices", 15, 3)
		for _, p := range []string{"a", "b", "c"} {
			createPod(ns, p, "invoices")
		}
		expectSlot(ns, "invoices", 2, "c", 3)
		renew(ns, "invoices-slot-2")
		createPod(ns, "d", "invoices")

		By("lowering holders to 2: slot 2's holder is asked to hand off, no one follows it")
		setHolders(ns, "invoices", 2)
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, ns, "c").Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodDraining)))
			fl := getFL(ns, "invoices")
			g.Expect(fl.Status.Slots).To(HaveLen(3))
			g.Expect(fl.Status.Slots[2].Holder.Handoff).To(HaveField("SuccessorName", fencingv1.SlotRemovedSuccessor))
			g.Expect(fl.Status.Holding).To(Equal("3/2"))
			l := getLease(g, ns, "invoices-slot-2")
			g.Expect(l.Annotations).To(HaveKeyWithValue(fencingv1.SuccessorAnnotation, fencingv1.SlotRemovedSuccessor))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		By("its holder releases: the slot is gone, and the waiting pod is not granted it")
		release(ns, "invoices-slot-2")
		Eventually(func(g Gomega) {
			fl := getFL(ns, "invoices")
			g.Expect(fl.Status.Slots).To(HaveLen(2))
			g.Expect(fl.Status.Holding).To(Equal("2/2"))
			g.Expect(getPod(g, ns, "c").Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodReleased)))
			g.Expect(getPod(g, ns, "c").Labels).NotTo(HaveKey(fencingv1.SlotLabel))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Consistently(func(g Gomega) { expectWaiting(g, ns, "d") }).WithTimeout(time.Second).WithPolling(poll).Should(Succeed())

		By("raising holders to 3 again: slot 2 is granted at once")
		setHolders(ns, "invoices", 3)
		expectSlot(ns, "invoices", 2, "d", 4)
	})

	It("cuts a draining holder of a removed slot off when the grace period ends", func() {
		createSlotsFL(ns, "invoices", 2, 2, func(fl *fencingv1.FencedLease) { fl.Spec.HandoffGracePeriodSeconds = 1 })
		createPod(ns, "a", "invoices")
		createPod(ns, "b", "invoices")
		expectSlot(ns, "invoices", 1, "b", 2)
		stop0 := keepRenewing(ns, "invoices", 300*time.Millisecond)
		defer stop0()
		stop1 := keepRenewing(ns, "invoices-slot-1", 300*time.Millisecond)
		defer stop1()
		setHolders(ns, "invoices", 1)

		By("b keeps renewing but never releases: cut off and revoked; one slot is left, slot 0's holder never moved")
		Eventually(func(g Gomega) {
			fl := getFL(ns, "invoices")
			g.Expect(fl.Status.Slots).To(HaveLen(1), "slots: %s", slotsOf(fl))
			g.Expect(fl.Status.Holding).To(Equal("1/1"))
			g.Expect(fl.Status.Slots[0].LastRevocation).To(BeNil(), "slot 0 was never revoked")
			g.Expect(getPod(g, ns, "b").Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodRevoked)))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		expectSlot(ns, "invoices", 0, "a", 1)
	})

	It("upgrades a single grant to slots: the holder keeps its grant in slot 0, under the same Lease", func() {
		createFL(ns, "invoices", 15, fencingv1.DeletePodPolicy)
		createPod(ns, "a", "invoices")
		createPod(ns, "b", "invoices")
		expectHolder(ns, "invoices", "a", 1)
		renew(ns, "invoices")
		before := getLease(Default, ns, "invoices")

		setHolders(ns, "invoices", 2)
		expectSlot(ns, "invoices", 1, "b", 2)
		expectSlot(ns, "invoices", 0, "a", 1)
		after := getLease(Default, ns, "invoices")
		Expect(after.Spec.AcquireTime).To(Equal(before.Spec.AcquireTime), "slot 0's grant is the same grant")
		Expect(after.Spec.LeaseTransitions).To(Equal(before.Spec.LeaseTransitions))
	})

	// N2.
	It("re-created with fewer slots, continues above every slot's tokens", func() {
		createSlotsFL(ns, "invoices", 15, 3)
		for _, p := range []string{"a", "b", "c"} {
			createPod(ns, p, "invoices")
		}
		expectSlot(ns, "invoices", 2, "c", 3)
		Expect(k8s.Delete(ctx, getFL(ns, "invoices"))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, ns, "c").Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodRevoked)))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Eventually(func() bool { return flGone(ns, "invoices") }).WithTimeout(timeout).WithPolling(poll).Should(BeTrue())

		createPod(ns, "d", "invoices")
		createFL(ns, "invoices", 15, fencingv1.DeletePodPolicy)
		expectHolder(ns, "invoices", "d", 4)
	})

	It("applies suspend, minFencingToken and the revocation delay to each slot, and names the slot in its events", func() {
		createSlotsFL(ns, "invoices", 2, 2, func(fl *fencingv1.FencedLease) {
			fl.Spec.Suspend = true
			fl.Spec.MinFencingToken = 40
			fl.Spec.RevocationDelaySeconds = 2
		})
		for _, p := range []string{"a", "b", "c"} {
			createPod(ns, p, "invoices")
		}
		By("suspended: no slot grants")
		Consistently(func(g Gomega) {
			for _, p := range []string{"a", "b"} {
				expectWaiting(g, ns, p)
			}
		}).WithTimeout(time.Second).WithPolling(poll).Should(Succeed())

		By("resumed: every slot grants above minFencingToken")
		Eventually(func(g Gomega) {
			fl := getFL(ns, "invoices")
			fl.Spec.Suspend = false
			g.Expect(k8s.Update(ctx, fl)).To(Succeed())
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		expectSlot(ns, "invoices", 0, "a", 41)
		expectSlot(ns, "invoices", 1, "b", 42)
		stop := keepRenewing(ns, "invoices", 300*time.Millisecond)
		defer stop()

		By("slot 1's holder never renews: revoked, and its next grant waits out the lock-delay; slot 0 is untouched")
		var revoked time.Time
		Eventually(func(g Gomega) {
			rv := getFL(ns, "invoices").Status.Slots[1].LastRevocation
			g.Expect(rv).NotTo(BeNil())
			g.Expect(rv.DelaySeconds).To(BeEquivalentTo(2))
			revoked = rv.Time.Time
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		expectSlot(ns, "invoices", 1, "c", 43)
		granted := getFL(ns, "invoices").Status.Slots[1].Holder.AcquireTime.Time
		Expect(granted.Sub(revoked)).To(BeNumerically(">=", 2*time.Second-50*time.Millisecond), "the lock-delay")
		expectSlot(ns, "invoices", 0, "a", 41)

		Eventually(func(g Gomega) {
			events := &eventsv1.EventList{}
			g.Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
			var notes []string
			for _, e := range events.Items {
				if e.Regarding.Kind == "FencedLease" {
					notes = append(notes, e.Note)
				}
			}
			g.Expect(notes).To(ContainElement("slot 0: granted token 41 to pod a"))
			g.Expect(notes).To(ContainElement(HavePrefix("slot 1: revoked token 42 of pod b: StartupDeadlineExceeded")))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})

	DescribeTable("refuses spec.holders outside 1 to 100 with a clear message",
		func(holders int32, message string) {
			fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"},
				Spec: fencingv1.FencedLeaseSpec{Holders: holders}}
			err := k8s.Create(ctx, fl)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("negative", int32(-1), "spec.holders: Invalid value: -1: spec.holders in body should be greater than or equal to 1"),
		Entry("above 100", int32(101), "spec.holders: Invalid value: 101: spec.holders in body should be less than or equal to 100"),
	)
})

// createSlotsFL creates a FencedLease with holders slots.
func createSlotsFL(ns, name string, duration, holders int32, mods ...func(*fencingv1.FencedLease)) *fencingv1.FencedLease {
	GinkgoHelper()
	fl := &fencingv1.FencedLease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: duration, StartupDeadlineSeconds: duration,
			RevocationPolicy: fencingv1.KeepPodPolicy, Holders: holders},
	}
	for _, mod := range mods {
		mod(fl)
	}
	Expect(k8s.Create(ctx, fl)).To(Succeed())
	return fl
}

// setHolders sets spec.holders, retried on conflicts with the controller's writes.
func setHolders(ns, name string, holders int32) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		fl := getFL(ns, name)
		fl.Spec.Holders = holders
		g.Expect(k8s.Update(ctx, fl)).To(Succeed())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// release does what a holder's release does: clear holderIdentity on its own Lease.
func release(ns, lease string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		l := getLease(g, ns, lease)
		l.Spec.HolderIdentity = nil
		g.Expect(k8s.Update(ctx, l)).To(Succeed())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

func flGone(ns, name string) bool {
	err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &fencingv1.FencedLease{})
	return apierrors.IsNotFound(err)
}

// expectSlot waits until the status, the slot's Lease and the pod agree that pod holds
// slot with token.
func expectSlot(ns, name string, slot int32, pod string, token int64) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		fl := getFL(ns, name)
		var s *fencingv1.Slot
		for i := range fl.Status.Slots {
			if fl.Status.Slots[i].Slot == slot {
				s = &fl.Status.Slots[i]
			}
		}
		g.Expect(s).NotTo(BeNil(), "status.slots lists slot %d", slot)
		g.Expect(s.Holder).To(HaveField("PodName", pod), "slots: %s", slotsOf(fl))
		g.Expect(s.Holder.Token).To(Equal(token))
		g.Expect(fl.Status.FencingToken).To(BeNumerically(">=", token))

		l := getLease(g, ns, fencingv1.SlotLeaseName(name, slot))
		g.Expect(l.Spec.HolderIdentity).To(HaveValue(Equal(pod)))
		g.Expect(l.Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, strconv.FormatInt(token, 10)))
		g.Expect(l.Labels).To(HaveKeyWithValue(fencingv1.LeaseLabel, name))
		g.Expect(l.Labels).To(HaveKeyWithValue(fencingv1.SlotLabel, strconv.Itoa(int(slot))))

		p := getPod(g, ns, pod)
		g.Expect(p.UID).To(Equal(s.Holder.PodUID))
		g.Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, strconv.FormatInt(token, 10)))
		g.Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.SlotAnnotation, strconv.Itoa(int(slot))))
		g.Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodHolding)))
		g.Expect(p.Labels).To(HaveKeyWithValue(fencingv1.HolderLabel, "true"))
		g.Expect(p.Labels).To(HaveKeyWithValue(fencingv1.SlotLabel, strconv.Itoa(int(slot))))
		g.Expect(p.Spec.SchedulingGates).To(BeEmpty())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// slotsOf says who holds which slot, for failure messages.
func slotsOf(fl *fencingv1.FencedLease) string {
	var out []string
	for _, s := range fl.Status.Slots {
		h := "free"
		if s.Holder != nil {
			h = fmt.Sprintf("%s/%d", s.Holder.PodName, s.Holder.Token)
		}
		out = append(out, fmt.Sprintf("%d:%s", s.Slot, h))
	}
	return strings.Join(out, " ")
}
