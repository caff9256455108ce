package holder_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fencedlease/fencedlease/internal/agent"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

var _ = Describe("The agent's state for the workload", func() {
	It("says Holding with a deadline, Lost when renewals fail, Holding again when they get through, and Ended once the grant moved on", func() {
		ns := grantedNamespace(15)
		cs, link := holderClient()
		file := filepath.Join(GinkgoT().TempDir(), "state")
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		addr := l.Addr().String() // free a moment ago
		Expect(l.Close()).To(Succeed())
		agentCtx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		go func() {
			defer GinkgoRecover()
			// A short deadline, so a cut link is Lost long before the 15 s lease ends.
			Expect(agent.Run(agentCtx, holder.Config{Leases: holder.ClientGo(cs.CoordinationV1()), Namespace: ns, LeaseName: "invoices",
				Identity: "a", Token: 1, RenewInterval: 300 * time.Millisecond, RenewDeadline: 1500 * time.Millisecond},
				agent.Options{StateFile: file, Listen: addr}, logf.Log.WithName("agent"))).To(Succeed())
		}()
		fromFile := func(g Gomega) agent.State {
			raw, err := os.ReadFile(file)
			g.Expect(err).NotTo(HaveOccurred())
			var st agent.State
			g.Expect(json.Unmarshal(raw, &st)).To(Succeed())
			return st
		}
		fromEndpoint := func(g Gomega) agent.State {
			resp, err := http.Get("http://" + addr + "/state")
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			var st agent.State
			g.Expect(json.NewDecoder(resp.Body).Decode(&st)).To(Succeed())
			return st
		}

		var holding agent.State
		Eventually(func(g Gomega) {
			holding = fromFile(g)
			g.Expect(holding.State).To(Equal(agent.StateHolding))
			g.Expect(holding.Token).To(BeEquivalentTo(1))
			g.Expect(holding.Deadline).NotTo(BeNil())
			g.Expect(*holding.Deadline).To(BeTemporally(">", time.Now()))
			g.Expect(fromEndpoint(g).State).To(Equal(agent.StateHolding))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		By("the link cut: Lost, with the reason, in the file and on the endpoint")
		link.cut.Store(true)
		Eventually(func(g Gomega) {
			st := fromFile(g)
			g.Expect(st.State).To(Equal(agent.StateLost))
			g.Expect(st.Deadline).To(BeNil())
			g.Expect(st.Reason).To(ContainSubstring("renew deadline"))
			g.Expect(fromEndpoint(g).State).To(Equal(agent.StateLost))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		By("the link back within the lease: the grant is still ours, Holding again")
		link.cut.Store(false)
		Eventually(func(g Gomega) {
			st := fromFile(g)
			g.Expect(st.State).To(Equal(agent.StateHolding))
			g.Expect(*st.Deadline).To(BeTemporally(">", *holding.Deadline))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Expect(holderOf(Default, ns)).To(Equal("a/1"))

		By("the grant moving on (the holder's pod deleted, b granted): Ended")
		Expect(k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}})).To(Succeed())
		grantOf(ns, "b")
		Eventually(func(g Gomega) {
			st := fromFile(g)
			g.Expect(st.State).To(Equal(agent.StateEnded))
			g.Expect(st.Reason).To(ContainSubstring("revoked"))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})
})
