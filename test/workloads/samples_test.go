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

var _ = Describe("The Warm sample, applied as it is (issue 21, item 7)", func() {
	It("deployment_warm.yaml: three running replicas, one holds, the Service reaches it alone, and the rollout completes", func() {
		ns, grants := newWatchedNamespace()
		applySamples(ns, "holder_rbac.yaml", "deployment_warm.yaml")
		startWarmHolders(ns) // what the agents do, on kwok
		d := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "leader"}, d)).To(Succeed())
		expectDeploymentComplete(d, 3)
		var first string
		Eventually(func(g Gomega) {
			h := holderOf(g, ns, "leader")
			g.Expect(h.FirstRenewTime).NotTo(BeNil())
			first = h.PodName
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		expectEndpointsOf(ns, "leader", first)

		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		d.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
		Expect(k8s.Update(ctx, d)).To(Succeed())
		expectDeploymentComplete(d, 3)
		var next string
		Eventually(func(g Gomega) {
			h := holderOf(g, ns, "leader")
			g.Expect(h.Token).To(BeEquivalentTo(2))
			g.Expect(h.FirstRenewTime).NotTo(BeNil())
			g.Expect(get(g, ns, h.PodName).Spec.Containers[0].Image).To(Equal("busybox:1.37"))
			next = h.PodName
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		expectEndpointsOf(ns, "leader", next)
		Expect(grants.Tokens()).To(Equal([]int64{1, 2}))
	})
})

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
		d := &appsv1.Deployment{}
		holdThenRoll(ns, "report-generator", d, func(image string) { d.Spec.Template.Spec.Containers[0].Image = image })
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
			g.Expect(d.Status.UpdatedReplicas).To(BeEquivalentTo(1))
			g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})

	It("deployment_rolling.yaml: one replica holds; a RollingUpdate asks it to hand off, and the shell workload that cannot is cut off after the grace period", func() {
		ns := newNamespace()
		applySamples(ns, "holder_rbac.yaml", "deployment_rolling.yaml")
		d := &appsv1.Deployment{}
		holdThenRoll(ns, "dispatcher", d, func(image string) { d.Spec.Template.Spec.Containers[0].Image = image })
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
			g.Expect(d.Status.UpdatedReplicas).To(BeEquivalentTo(1))
			g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1))
			g.Expect(d.Status.Replicas).To(BeEquivalentTo(1))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Expect(holderOf(Default, ns, "dispatcher").Token).To(BeEquivalentTo(2))
		fl := &fencingv1.FencedLease{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dispatcher"}, fl)).To(Succeed())
		Expect(fl.Status.LastRevocation.Reason).To(Equal(fencingv1.ReasonHandoffTimeout))
	})

	It("statefulset.yaml: its pod holds; a rolling update hands over to token 2 under the same name", func() {
		ns := newNamespace()
		applySamples(ns, "holder_rbac.yaml", "statefulset.yaml")
		s := &appsv1.StatefulSet{}
		holder := holdThenRoll(ns, "ledger-compactor", s, func(image string) { s.Spec.Template.Spec.Containers[0].Image = image })
		Expect(holder).To(Equal("ledger-compactor-0"))
	})
})

// holdThenRoll waits until lease's holder (from workload, named like the lease) renewed
// token 1, rolls workload to a new image with setImage, and waits until token 2's pod
// runs that image. It returns the new holder's name.
func holdThenRoll(ns, lease string, workload client.Object, setImage func(string)) string {
	const image = "busybox:1.37"
	GinkgoHelper()
	startAgentsFor(ns, lease)
	Eventually(func(g Gomega) {
		h := holderOf(g, ns, lease)
		g.Expect(h.Token).To(BeEquivalentTo(1))
		g.Expect(h.FirstRenewTime).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: lease}, workload)).To(Succeed())
	setImage(image)
	Expect(k8s.Update(ctx, workload)).To(Succeed())
	var name string
	Eventually(func(g Gomega) {
		h := holderOf(g, ns, lease)
		g.Expect(h.Token).To(BeEquivalentTo(2))
		p := get(g, ns, h.PodName)
		g.Expect(p.Spec.Containers[0].Image).To(Equal(image))
		g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		name = p.Name
	}).WithTimeout(2 * timeout).WithPolling(poll).Should(Succeed()) // a hand-off cut off after its grace takes grace + lease
	return name
}
