package holder_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/fencedlease/fencedlease/pkg/holder"
)

var _ = Describe("holder.Exec (fencedlease hold)", func() {
	It("runs the command with its token, returns its exit status and hands over at once when it ends", func() {
		ns := grantedNamespace(15)
		cs, _ := holderClient()
		out := filepath.Join(GinkgoT().TempDir(), "token")
		cmd := exec.Command("sh", "-c", `echo "$FENCING_TOKEN $FENCING_LEASE_NAME $FENCING_HOLDER_IDENTITY" > "$0"; exit 3`, out)
		res, err := holder.Exec(ctx, holder.Config{Leases: holder.ClientGo(cs.CoordinationV1()), Namespace: ns, LeaseName: "invoices",
			Identity: "a", Token: 1, StopGrace: time.Second}, cmd)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.ExitCode).To(Equal(3))
		Expect(res.Lost).To(BeNil())
		Expect(res.Signalled.IsZero()).To(BeTrue(), "a command that ends on its own is not signalled")
		raw, err := os.ReadFile(out)
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(string(raw))).To(Equal("1 invoices a"))
		next := grantOf(ns, "b")
		Expect(next.Token).To(BeEquivalentTo(2))
		Expect(next.AcquireTime.Sub(res.Exited)).To(BeNumerically("<", 5*time.Second), "released, not left to expire (lease 15 s)")
	})

	It("kills a command that ignores SIGTERM before the next grant when renewals cannot get through", func() {
		const grace = time.Second
		ns := grantedNamespace(3)
		cs, link := holderClient()
		var lost lostAt
		// The command ignores SIGTERM, so only SIGKILL, grace after it, ends it.
		cmd := exec.Command("sh", "-c", `trap "" TERM; while :; do sleep 0.05; done`)
		done := make(chan holder.ExecResult, 1)
		go func() {
			defer GinkgoRecover()
			res, err := holder.Exec(ctx, holder.Config{Leases: holder.ClientGo(cs.CoordinationV1()), Namespace: ns, LeaseName: "invoices",
				Identity: "a", Token: 1, StopGrace: grace, Callbacks: holder.Callbacks{OnLost: lost.record}}, cmd)
			Expect(err).NotTo(HaveOccurred())
			done <- res
		}()
		By("seeing a background renewal land before cutting the link")
		first := renewTime(ns)
		Eventually(func() time.Time { return renewTime(ns) }).WithTimeout(timeout).WithPolling(poll).Should(BeTemporally(">", first))
		link.cut.Store(true)

		var res holder.ExecResult
		Eventually(done).WithTimeout(timeout).Should(Receive(&res))
		Expect(res.Lost).To(MatchError(holder.ErrDeadline))
		Expect(res.ExitCode).To(Equal(-1), "ended by a signal")
		Expect(res.Exited.Sub(res.Signalled)).To(BeNumerically(">=", grace-50*time.Millisecond), "SIGKILL only after the grace period")
		lostAt, _ := lost.get()
		next := grantOf(ns, "b")
		Expect(next.Token).To(BeEquivalentTo(2))
		Expect(res.Exited).To(BeTemporally("<", next.AcquireTime.Time), "the command must be dead before the next pod is granted")
		GinkgoWriter.Printf("hold: grant lost → SIGTERM %v; SIGTERM → dead %v (grace %v); dead → next grant %v (lease 3 s)\n",
			res.Signalled.Sub(lostAt), res.Exited.Sub(res.Signalled), grace, next.AcquireTime.Sub(res.Exited))
	})
})
