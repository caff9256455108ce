package holder_test

import (
	"context"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/holder"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// countingLeases counts what a holder asks of the API server.
type countingLeases struct {
	next                 holder.LeaseClients
	gets, updates, watch atomic.Int32
}

func (c *countingLeases) Leases(ns string) holder.LeaseClient {
	return countingLease{c, c.next.Leases(ns)}
}

type countingLease struct {
	c    *countingLeases
	next holder.LeaseClient
}

func (l countingLease) Get(ctx context.Context, name string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	l.c.gets.Add(1)
	return l.next.Get(ctx, name, o)
}

func (l countingLease) Update(ctx context.Context, lease *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	l.c.updates.Add(1)
	return l.next.Update(ctx, lease, o)
}

func (l countingLease) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	l.c.watch.Add(1)
	return l.next.Watch(ctx, o)
}

// warmNamespace runs a controller in a new namespace with a FencedLease of the given
// duration in Warm standby and Warm candidates a and b (as the webhook leaves them: state
// Waiting, no gate); it returns the namespace and the pods' UIDs.
func warmNamespace(durationSeconds int32) (string, map[string]types.UID) {
	GinkgoHelper()
	ns := controlledNamespace("warm-", fencingv1.FencedLeaseSpec{LeaseDurationSeconds: durationSeconds, StartupDeadlineSeconds: 30,
		Standby: fencingv1.StandbyWarm})
	uids := map[string]types.UID{}
	for _, name := range []string{"a", "b"} {
		p := testenv.WarmCandidatePod(ns, name, "invoices")
		Expect(k8s.Create(ctx, p)).To(Succeed()) // same second: ties go by name, a first
		uids[name] = p.UID
	}
	return ns, uids
}

var _ = Describe("pkg/holder in a Warm standby (issue 21, item 2)", func() {
	It("waits on one watch, not a loop of reads, and starts the moment the grant moves to it", func() {
		ns, uids := warmNamespace(2)
		cs, _ := holderClient()
		leases := holder.ClientGo(cs.CoordinationV1())
		a, err := holder.StartWhenGranted(ctx, holder.Config{Leases: leases, Namespace: ns, LeaseName: "invoices", Identity: "a",
			UID: uids["a"]})
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Token()).To(BeEquivalentTo(1))

		waiter := &countingLeases{next: leases}
		type started struct {
			h  *holder.Holder
			at time.Time
		}
		got := make(chan started, 1)
		go func() {
			defer GinkgoRecover()
			h, err := holder.StartWhenGranted(ctx, holder.Config{Leases: waiter, Namespace: ns, LeaseName: "invoices", Identity: "b",
				UID: uids["b"]})
			Expect(err).NotTo(HaveOccurred())
			got <- started{h, time.Now()}
		}()
		By("costing one watch and no read while a renews for several lease durations")
		Consistently(got).WithTimeout(5 * time.Second).WithPolling(100 * time.Millisecond).ShouldNot(Receive())
		Expect(waiter.gets.Load()).To(BeZero(), "reads while waiting: the watch from no version starts with the Leases there are")
		Expect(waiter.watch.Load()).To(BeEquivalentTo(1), "watches while waiting")
		Expect(waiter.updates.Load()).To(BeZero(), "a waiter writes nothing")

		released := time.Now()
		Expect(a.Release(ctx)).To(Succeed())
		var b started
		Eventually(got).WithTimeout(timeout).Should(Receive(&b))
		DeferCleanup(func() { _ = b.h.Release(ctx) })
		Expect(b.h.Token()).To(BeEquivalentTo(2))
		Expect(b.h.Err()).To(Succeed())
		GinkgoWriter.Printf("a Release()→b StartWhenGranted returned (first renewal confirmed): %v\n", b.at.Sub(released))
		Expect(b.at.Sub(released)).To(BeNumerically("<", 5*time.Second), "the standby starts on the grant, not on a lease expiry")
	})

	It("never takes a grant of an earlier pod of the same name", func() {
		ns, _ := warmNamespace(15)
		cs, _ := holderClient()
		Eventually(func(g Gomega) { g.Expect(holderOf(g, ns)).To(Equal("a/1")) }).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := holder.StartWhenGranted(short, holder.Config{Leases: holder.ClientGo(cs.CoordinationV1()), Namespace: ns,
			LeaseName: "invoices", Identity: "a", UID: "not-the-granted-pod"})
		Expect(err).To(MatchError(context.DeadlineExceeded), "a pod named a with another UID waits on")
		l := &coordinationv1.Lease{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, l)).To(Succeed())
		Expect(l.Spec.RenewTime.Equal(l.Spec.AcquireTime)).To(BeTrue(), "and renewed nothing")
	})
})
