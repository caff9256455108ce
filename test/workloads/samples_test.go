package workloads

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// applySamples creates the objects of config/samples files in ns, exactly as written.
func applySamples(ns string, files ...string) {
	GinkgoHelper()
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", f))
		Expect(err).NotTo(HaveOccurred())
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			obj := map[string]any{}
			Expect(yaml.Unmarshal([]byte(doc), &obj)).To(Succeed(), f)
			if len(obj) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: obj}
			u.SetNamespace(ns)
			Expect(k8s.Create(ctx, u)).To(Succeed(), "%s: %s %s", f, u.GetKind(), u.GetName())
		}
	}
}

func holderOf(g Gomega, ns, lease string) *fencingv1.Holder {
	fl := &fencingv1.FencedLease{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: lease}, fl)).To(Succeed())
	g.Expect(fl.Status.Holder).NotTo(BeNil())
	return fl.Status.Holder
}

var _ = Describe("The workload samples, applied as they are (issue 8, section 4)", func() {
	It("job.yaml: the Job's three pods take turns with tokens 1, 2, 3 and the Job completes", func() {
		ns, grants := newWatchedNamespace()
		applySamples(ns, "holder_rbac.yaml", "job.yaml")
		job := &batchv1.Job{}
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "invoice-batch"}, job)).To(Succeed())
			g.Expect(job.Status.Succeeded).To(BeEquivalentTo(3))
		}).WithTimeout(2 * timeout).WithPolling(poll).Should(Succeed())
		tokens, err := grants.Stop()
		Expect(err).NotTo(HaveOccurred())
		Expect(tokens).To(Equal([]int64{1, 2, 3}))
	})

	It("deployment.yaml: one replica holds; a rollout (Recreate) hands over to token 2", func() {
		ns := newNamespace()
		applySamples(ns, "holder_rbac.yaml", "deployment.yaml")
		startAgentsFor(ns, "report-generator")
		Eventually(func(g Gomega) {
			h := holderOf(g, ns, "report-generator")
			g.Expect(h.Token).To(BeEquivalentTo(1))
			g.Expect(h.FirstRenewTime).NotTo(BeNil())
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		d := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "report-generator"}, d)).To(Succeed())
		d.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
		Expect(k8s.Update(ctx, d)).To(Succeed())
		Eventually(func(g Gomega) {
			h := holderOf(g, ns, "report-generator")
			g.Expect(h.Token).To(BeEquivalentTo(2))
			p := get(g, ns, h.PodName)
			g.Expect(p.Spec.Containers[0].Image).To(Equal("busybox:1.37"))
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
			g.Expect(d.Status.UpdatedReplicas).To(BeEquivalentTo(1))
			g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})

	It("statefulset.yaml: its pod holds; a rolling update hands over to token 2 under the same name", func() {
		ns := newNamespace()
		applySamples(ns, "holder_rbac.yaml", "statefulset.yaml")
		startAgentsFor(ns, "ledger-compactor")
		Eventually(func(g Gomega) {
			h := holderOf(g, ns, "ledger-compactor")
			g.Expect(h.Token).To(BeEquivalentTo(1))
			g.Expect(h.PodName).To(Equal("ledger-compactor-0"))
			g.Expect(h.FirstRenewTime).NotTo(BeNil())
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		s := &appsv1.StatefulSet{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ledger-compactor"}, s)).To(Succeed())
		s.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
		Expect(k8s.Update(ctx, s)).To(Succeed())
		Eventually(func(g Gomega) {
			h := holderOf(g, ns, "ledger-compactor")
			g.Expect(h.Token).To(BeEquivalentTo(2))
			g.Expect(h.PodName).To(Equal("ledger-compactor-0"))
			g.Expect(get(g, ns, h.PodName).Status.Phase).To(Equal(corev1.PodRunning))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})
})
