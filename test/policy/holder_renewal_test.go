package policy

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/holder"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// leaseRequests records "METHOD status" of every Lease request a client sends.
type leaseRequests struct {
	rt   http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func (l *leaseRequests) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(r)
	if err == nil && strings.Contains(r.URL.Path, "/leases/") {
		l.mu.Lock()
		l.seen = append(l.seen, r.Method+" "+http.StatusText(resp.StatusCode))
		l.mu.Unlock()
	}
	return resp, err
}

func (l *leaseRequests) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

var _ = Describe("pkg/holder under the shipped holder role and Lease policy", func() {
	It("renews as the holder role allows and the Lease policy accepts, and is revoked when the grant moves on", func() {
		ns := newNamespace()
		bind(ns, "holder-role", rbacv1.Subject{Kind: "ServiceAccount", Name: "worker", Namespace: ns})
		now := metav1.NewMicroTime(time.Now())
		Expect(admin.Create(ctx, &coordinationv1.Lease{ // as the operator writes it for pod a, token 3
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: "invoices",
				Labels:      map[string]string{fencingv1.LeaseLabel: "invoices"},
				Annotations: map[string]string{fencingv1.TokenAnnotation: "3", fencingv1.HolderUIDAnnotation: "uid-of-a"},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To[int32](15),
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To[int32](3),
			},
		})).To(Succeed())

		// Pod a's own client, as its bound service-account token makes it.
		c := testenv.AsUser(cfg, "system:serviceaccount:"+ns+":worker", []string{"system:serviceaccounts", "system:serviceaccounts:" + ns},
			map[string][]string{"authentication.kubernetes.io/pod-name": {"a"}, "authentication.kubernetes.io/pod-uid": {"uid-of-a"}})
		rec := &leaseRequests{}
		c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { rec.rt = rt; return rec }
		cs, err := kubernetes.NewForConfig(c)
		Expect(err).NotTo(HaveOccurred())
		h, err := holder.Start(ctx, holder.Config{Leases: holder.ClientGo(cs.CoordinationV1()), Namespace: ns, LeaseName: "invoices",
			Identity: "a", Token: 3, RenewInterval: 200 * time.Millisecond})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = h.Release(context.Background()) })
		renewals := func() []string { return rec.all()[1:] } // the first is Start's read of the Lease
		Eventually(func(g Gomega) {
			g.Expect(len(renewals())).To(BeNumerically(">=", 4))
		}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
		Expect(renewals()).To(HaveEach("PUT OK"), "every renewal accepted")
		Expect(h.Holding()).To(BeTrue())

		l := &coordinationv1.Lease{} // the operator grants pod b token 4
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "invoices"}, l)).To(Succeed())
		l.Spec.HolderIdentity = ptr.To("b")
		l.Annotations[fencingv1.TokenAnnotation] = "4"
		l.Annotations[fencingv1.HolderUIDAnnotation] = "uid-of-b"
		Expect(admin.Update(ctx, l)).To(Succeed())
		Eventually(h.Context().Done()).WithTimeout(5 * time.Second).Should(BeClosed())
		Expect(h.Err()).To(MatchError(holder.ErrRevoked))
		Expect(rec.all()).To(ContainElement("PUT Conflict"), "the renewal built on the old grant was refused")
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "invoices"}, l)).To(Succeed())
		Expect(l.Spec.HolderIdentity).To(HaveValue(Equal("b")))
		Expect(l.Annotations).To(HaveKeyWithValue(fencingv1.TokenAnnotation, "4"))
	})
})
