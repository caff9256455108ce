package holder_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fencedlease/fencedlease/pkg/holder"
)

// lateRenewal is a link on which, once armed, the holder's next renewal (a PUT) is held
// back after the holder gave up on it, and lands on the server only after the next read
// (GET) of the Lease was answered: a renewal cancelled by the client but committed by the
// server, in the worst place for Release.
type lateRenewal struct {
	rt http.RoundTripper

	mu      sync.Mutex
	armed   bool
	held    *http.Request
	sawHeld chan struct{}
	landed  chan struct{}
}

func (l *lateRenewal) RoundTrip(r *http.Request) (*http.Response, error) {
	l.mu.Lock()
	if l.armed && r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/leases/") {
		l.armed = false
		l.held = r.Clone(context.Background())
		l.mu.Unlock()
		close(l.sawHeld)
		<-r.Context().Done() // the holder cancels it (Release ends the renewal loop)
		return nil, r.Context().Err()
	}
	held := l.held
	if held != nil && r.Method == http.MethodGet {
		l.held = nil
	}
	l.mu.Unlock()
	resp, err := l.rt.RoundTrip(r)
	if held != nil && r.Method == http.MethodGet {
		if late, lerr := l.rt.RoundTrip(held); lerr == nil {
			late.Body.Close()
		}
		close(l.landed)
	}
	return resp, err
}

var _ = Describe("Release", func() {
	It("releases even when a renewal it cancelled lands after it read the Lease", func() {
		ns := grantedNamespace(3)
		link := &lateRenewal{sawHeld: make(chan struct{}), landed: make(chan struct{})}
		c := rest.CopyConfig(cfg)
		c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { link.rt = rt; return link }
		cs, err := kubernetes.NewForConfig(c)
		Expect(err).NotTo(HaveOccurred())
		h, err := holder.Start(ctx, holder.Config{
			Leases: holder.ClientGo(cs.CoordinationV1()), Namespace: ns, LeaseName: "invoices", Identity: "a", Token: 1,
		})
		Expect(err).NotTo(HaveOccurred())

		link.mu.Lock()
		link.armed = true
		link.mu.Unlock()
		Eventually(link.sawHeld).WithTimeout(timeout).Should(BeClosed(), "a background renewal is in flight")
		Expect(h.Release(ctx)).To(Succeed())
		Expect(link.landed).To(BeClosed(), "the cancelled renewal landed between Release's read and write")
		Eventually(func(g Gomega) { g.Expect(holderOf(g, ns)).To(Equal("b/2")) }).
			WithTimeout(2*time.Second).WithPolling(poll).Should(Succeed(), "handed over at once, not after the 3 s lease")
	})
})
