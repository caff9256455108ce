package authority

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlease/fencedlease/test/testenv"
)

// uidOf reads a cluster-scoped flowcontrol object's UID.
func uidOf(kind, name string) string {
	GinkgoHelper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Kind: kind})
	Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, u)).To(Succeed())
	return string(u.GetUID())
}

var _ = Describe("API Priority and Fairness for renewals (issue 23, item 2)", func() {
	It("puts a holder's Lease requests in the leader-election priority level, and nothing else of it", func() {
		w := heldAndWaiting()
		holderCfg := testenv.AsUser(cfg, "system:serviceaccount:"+w.ns+":worker",
			[]string{"system:serviceaccounts", "system:serviceaccounts:" + w.ns}, nil)
		hc, err := rest.HTTPClientFor(holderCfg)
		Expect(err).NotTo(HaveOccurred())
		flow := func(path string) (string, string) {
			GinkgoHelper()
			resp, err := hc.Get(cfg.Host + path)
			Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			return resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"), resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")
		}
		ours, level := uidOf("FlowSchema", "fencedlease-lease-renewals"), uidOf("PriorityLevelConfiguration", "leader-election")

		schema, priority := flow("/apis/coordination.k8s.io/v1/namespaces/" + w.ns + "/leases/invoices")
		Expect(schema).To(Equal(ours), "a service account's Lease read is classified by fencedlease-lease-renewals")
		Expect(priority).To(Equal(level), "in the leader-election priority level")

		schema, _ = flow("/api/v1/namespaces/" + w.ns + "/pods")
		Expect(schema).NotTo(BeEmpty())
		Expect(schema).NotTo(Equal(ours), "its other requests are not")
	})

	It("puts the operator's own requests in workload-high, its Lease requests in leader-election, and no one else's", func() {
		w := heldAndWaiting()
		get := func(c *rest.Config, path string) (string, string) {
			GinkgoHelper()
			hc, err := rest.HTTPClientFor(c)
			Expect(err).NotTo(HaveOccurred())
			resp, err := hc.Get(cfg.Host + path)
			Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			return resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"), resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")
		}
		operatorSchema, high := uidOf("FlowSchema", "fencedlease-operator"), uidOf("PriorityLevelConfiguration", "workload-high")
		renewals, election := uidOf("FlowSchema", "fencedlease-lease-renewals"), uidOf("PriorityLevelConfiguration", "leader-election")
		op := testenv.AsOperator(cfg)

		for _, path := range []string{"/api/v1/namespaces/" + w.ns + "/pods", "/apis/fencing.fencedlease.io/v1alpha1/fencedleases"} {
			schema, level := get(op, path)
			Expect(schema).To(Equal(operatorSchema), "the operator's %s", path)
			Expect(level).To(Equal(high), "the operator's %s", path)
		}
		schema, level := get(op, "/apis/coordination.k8s.io/v1/namespaces/"+w.ns+"/leases/invoices")
		Expect(schema).To(Equal(renewals), "the operator's Lease read")
		Expect(level).To(Equal(election))

		other := testenv.AsUser(cfg, "system:serviceaccount:"+w.ns+":worker",
			[]string{"system:serviceaccounts", "system:serviceaccounts:" + w.ns}, nil)
		schema, _ = get(other, "/api/v1/namespaces/"+w.ns+"/pods")
		Expect(schema).NotTo(Equal(operatorSchema), "another service account's request")
	})
})
