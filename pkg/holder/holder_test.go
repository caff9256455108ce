package holder_test

import (
	"context"
	"maps"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/agent"
	"github.com/fencedlease/fencedlease/pkg/holder"
	"github.com/fencedlease/fencedlease/test/testenv"
)

const (
	timeout = 15 * time.Second
	poll    = 20 * time.Millisecond
)

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// counter is the value of the counter name with exactly these labels in reg, or -1.
func counter(reg *prometheus.Registry, name string, labels map[string]string) float64 {
	GinkgoHelper()
	families, err := reg.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if maps.Equal(testenv.Labels(m), labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// lostAt records when OnLost ran and why.
type lostAt struct {
	mu     sync.Mutex
	at     time.Time
	reason error
}

func (l *lostAt) record(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at, l.reason = time.Now(), err
}

func (l *lostAt) get() (time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.at, l.reason
}

func grantOf(ns, pod string) *fencingv1.Holder {
	GinkgoHelper()
	var h *fencingv1.Holder
	Eventually(func(g Gomega) {
		fl := &fencingv1.FencedLease{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, fl)).To(Succeed())
		g.Expect(fl.Status.Holder).NotTo(BeNil())
		g.Expect(fl.Status.Holder.PodName).To(Equal(pod))
		h = fl.Status.Holder
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return h
}

var _ = Describe("pkg/holder", func() {
	It("renews, and is never revoked while it does", func() {
		ns := grantedNamespace(1)
		cs, _ := holderClient()
		reg := prometheus.NewRegistry()
		h, err := holder.Start(ctx, holder.Config{
			Leases: holder.ClientGo(cs.CoordinationV1()), Namespace: ns, LeaseName: "invoices", Identity: "a", Token: 1,
			Metrics: holder.NewMetrics(reg),
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = h.Release(ctx) })
		Expect(h.Token()).To(BeEquivalentTo(1))
		Consistently(func(g Gomega) {
			g.Expect(holderOf(g, ns)).To(Equal("a/1"))
			g.Expect(h.Err()).To(Succeed())
		}).WithTimeout(4 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		Expect(counter(reg, "fencedlease_holder_renewals_total", map[string]string{"namespace": ns, "name": "invoices", "result": "ok"})).
			To(BeNumerically(">=", 1), "renewals are counted under the lease's namespace and name")
	})

	// Checks R1.
	It("refuses to start for a grant it does not hold", func() {
		ns := grantedNamespace(15)
		cs, _ := holderClient()
		for _, wrong := range []holder.Config{
			{Identity: "b", Token: 1}, // another pod
			{Identity: "a", Token: 2}, // a token it was never given
		} {
			wrong.Leases, wrong.Namespace, wrong.LeaseName = holder.ClientGo(cs.CoordinationV1()), ns, "invoices"
			_, err := holder.Start(ctx, wrong)
			Expect(err).To(MatchError(holder.ErrRevoked))
		}
	})

	It("cancels its context before the controller grants the next pod when renewals cannot get through", func() {
		const duration = 2 * time.Second
		ns := grantedNamespace(2)
		cs, link := holderClient()
		var lost lostAt
		h, err := holder.Start(ctx, holder.Config{
			Leases: holder.ClientGo(cs.CoordinationV1()), Namespace: ns, LeaseName: "invoices", Identity: "a", Token: 1,
			Callbacks: holder.Callbacks{OnLost: lost.record},
		})
		Expect(err).NotTo(HaveOccurred())
		By("seeing a background renewal land before cutting the link")
		first := renewTime(ns)
		Eventually(func() time.Time { return renewTime(ns) }).WithTimeout(timeout).WithPolling(poll).Should(BeTemporally(">", first))

		link.cut.Store(true)
		cutAt := time.Now()
		Eventually(h.Context().Done()).WithTimeout(timeout).Should(BeClosed())
		Expect(h.Err()).To(MatchError(holder.ErrDeadline))

		next := grantOf(ns, "b")
		Expect(next.Token).To(BeEquivalentTo(2))
		stoppedAt, reason := lost.get()
		Expect(reason).To(MatchError(holder.ErrDeadline))
		Expect(stoppedAt).To(BeTemporally("<", next.AcquireTime.Time), "the old holder must stop before the next is granted")
		GinkgoWriter.Printf("partition→holder stops: %v; holder stops→next grant: %v (duration %v)\n",
			stoppedAt.Sub(cutAt), next.AcquireTime.Sub(stoppedAt), duration)
	})

	It("hands over to the next pod promptly on Release", func() {
		ns := grantedNamespace(15)
		cs, _ := holderClient()
		h, err := holder.Start(ctx, holder.Config{
			Leases: holder.ClientGo(cs.CoordinationV1()), Namespace: ns, LeaseName: "invoices", Identity: "a", Token: 1,
		})
		Expect(err).NotTo(HaveOccurred())
		released := time.Now()
		Expect(h.Release(ctx)).To(Succeed())
		Expect(h.Err()).To(MatchError(holder.ErrReleased))
		next := grantOf(ns, "b")
		Expect(next.Token).To(BeEquivalentTo(2))
		took := next.AcquireTime.Sub(released)
		Expect(took).To(BeNumerically("<", 5*time.Second), "a release must not wait for the 15s expiry")
		GinkgoWriter.Printf("Release()→next grant: %v\n", took)
	})

	It("runs as the agent sidecar and keeps the pod granted", func() {
		ns := grantedNamespace(1)
		cs, _ := holderClient()
		agentCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- agent.Run(agentCtx, holder.Config{
				Leases: holder.ClientGo(cs.CoordinationV1()), Namespace: ns, LeaseName: "invoices", Identity: "a", Token: 1,
			}, agent.Options{}, logf.Log.WithName("agent"))
		}()
		Consistently(func(g Gomega) {
			g.Expect(holderOf(g, ns)).To(Equal("a/1"))
		}).WithTimeout(3 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		stop()
		Eventually(done).WithTimeout(timeout).Should(Receive(BeNil()))
	})
})

func renewTime(ns string) time.Time {
	GinkgoHelper()
	l := &coordinationv1.Lease{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoices"}, l)).To(Succeed())
	return l.Spec.RenewTime.Time
}
