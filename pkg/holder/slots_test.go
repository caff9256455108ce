package holder_test

import (
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/holder"
	"github.com/fencedlease/fencedlease/test/testenv"
)

var _ = Describe("pkg/holder in a FencedLease with slots (issue 49)", func() {
	It("waits on every slot's Lease at once, takes the slot it is granted, and renews that slot's Lease", func() {
		ns := controlledNamespace("slots-", fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 3, StartupDeadlineSeconds: 30,
			Standby: fencingv1.StandbyWarm, Holders: 3})
		uids := map[string]types.UID{}
		for _, name := range []string{"a", "b", "c"} {
			p := testenv.WarmCandidatePod(ns, name, "invoices")
			Expect(k8s.Create(ctx, p)).To(Succeed()) // same second: ties go by name
			uids[name] = p.UID
		}
		cs, _ := holderClient()
		leases := holder.ClientGo(cs.CoordinationV1())
		held := map[string]*holder.Holder{}
		for _, name := range []string{"a", "b", "c"} {
			h, err := holder.StartWhenGranted(ctx, holder.Config{Leases: leases, Namespace: ns, LeaseName: "invoices", Identity: name,
				UID: uids[name], Sharded: true})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { _ = h.Release(ctx) })
			held[name] = h
		}
		slots := map[int32]string{}
		for name, h := range held {
			slots[h.Slot()] = name
		}
		Expect(slots).To(HaveLen(3), "three pods, three slots")
		Expect(slots).To(Equal(map[int32]string{0: "a", 1: "b", 2: "c"}), "oldest first to the lowest slot; ties by name")
		Expect([]int64{held["a"].Token(), held["b"].Token(), held["c"].Token()}).To(ConsistOf(int64(1), int64(2), int64(3)))

		By("renewing, each on its own slot's Lease, for well past the 3 s lease")
		Consistently(func(g Gomega) {
			for _, h := range held {
				g.Expect(h.Holding()).To(BeTrue())
			}
		}).WithTimeout(5 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		for name, h := range held {
			l := leaseNamed(Default, ns, fencingv1.SlotLeaseName("invoices", h.Slot()))
			Expect(l.Spec.HolderIdentity).To(HaveValue(Equal(name)))
			Expect(l.Spec.RenewTime.Time).To(BeTemporally(">", l.Spec.AcquireTime.Time))
		}
	})

	It("reads FENCING_SLOT from the environment: a Cold holder of slot 2 renews the Lease of slot 2", func() {
		for k, v := range map[string]string{fencingv1.EnvLeaseNamespace: "ns", fencingv1.EnvLeaseName: "invoices",
			fencingv1.EnvHolderIdentity: "p", fencingv1.EnvToken: "7", fencingv1.EnvSlot: "2"} {
			GinkgoT().Setenv(k, v)
		}
		cfg, err := holder.Config{}.FromEnv()
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Sharded).To(BeTrue())
		Expect(cfg.Slot).To(BeEquivalentTo(2))
		Expect(cfg.Lease()).To(Equal("invoices-slot-2"))

		GinkgoT().Setenv(fencingv1.EnvSlot, "x")
		_, err = holder.Config{}.FromEnv()
		Expect(err).To(MatchError(ContainSubstring(`FENCING_SLOT="x" is not a granted slot`)))

		// Empty: the slot annotation is not there (a grant without slots), as in every
		// candidate the webhook admits.
		GinkgoT().Setenv(fencingv1.EnvSlot, "")
		cfg, err = holder.Config{}.FromEnv()
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Sharded).To(BeFalse(), "an empty FENCING_SLOT: a grant without slots")
		Expect(cfg.Lease()).To(Equal("invoices"))

		Expect(os.Unsetenv(fencingv1.EnvSlot)).To(Succeed())
		cfg, err = holder.Config{}.FromEnv()
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Sharded).To(BeFalse(), "without FENCING_SLOT, a FencedLease without slots")
		Expect(cfg.Lease()).To(Equal("invoices"))
	})

	// Issue 61, defect 2: a Warm pod admitted while the FencedLease had one grant (no
	// slot in its environment) is granted slot 1 once spec.holders is raised; it learns
	// its slot from the Lease it is granted on, confirms the grant there and renews it,
	// instead of renewing slot 0's Lease and being revoked at the startup deadline.
	It("takes the slot it is granted from the Lease, though its pod was admitted before spec.holders was raised", func() {
		ns := controlledNamespace("raised-", fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 3, StartupDeadlineSeconds: 30,
			Standby: fencingv1.StandbyWarm})
		uids := map[string]types.UID{}
		for _, name := range []string{"a", "b"} {
			p := testenv.WarmCandidatePod(ns, name, "invoices")
			Expect(k8s.Create(ctx, p)).To(Succeed())
			uids[name] = p.UID
		}
		cs, _ := holderClient()
		leases := holder.ClientGo(cs.CoordinationV1())
		a, err := holder.StartWhenGranted(ctx, holder.Config{Leases: leases, Namespace: ns, LeaseName: "invoices", Identity: "a", UID: uids["a"]})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = a.Release(ctx) })
		Expect(a.Slot()).To(BeZero())

		Eventually(func() error {
			fl := &fencingv1.FencedLease{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, fl); err != nil {
				return err
			}
			fl.Spec.Holders = 2
			return k8s.Update(ctx, fl) // the operator writes it too (its finalizer)
		}).WithTimeout(10 * time.Second).Should(Succeed())

		// b's environment says nothing of slots: Sharded is false, as FromEnv reads it.
		b, err := holder.StartWhenGranted(ctx, holder.Config{Leases: leases, Namespace: ns, LeaseName: "invoices", Identity: "b", UID: uids["b"]})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = b.Release(ctx) })
		Expect(b.Slot()).To(BeEquivalentTo(1), "the raised slot, read off the Lease that grants it")
		Consistently(func(g Gomega) {
			g.Expect(a.Holding()).To(BeTrue())
			g.Expect(b.Holding()).To(BeTrue())
		}).WithTimeout(4 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		l := leaseNamed(Default, ns, fencingv1.SlotLeaseName("invoices", 1))
		Expect(l.Spec.HolderIdentity).To(HaveValue(Equal("b")))
		Expect(l.Spec.RenewTime.Time).To(BeTemporally(">", l.Spec.AcquireTime.Time), "b renewed slot 1's Lease")
	})
})

func leaseNamed(g Gomega, ns, name string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, l)).To(Succeed())
	return l
}
