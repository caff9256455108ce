package workloads

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// template is a one-container pod template opted into FencedLease "invoices".
func template(image string) corev1.PodTemplateSpec {
	labels := map[string]string{fencingv1.LeaseLabel: "invoices", "app": "scheduler"}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "scheduler", Image: image}}},
	}
}

// expectHolderRunning waits until the holder has token, runs image, has renewed, and
// returns its name.
func expectHolderRunning(ns string, token int64, image string) string {
	GinkgoHelper()
	var name string
	Eventually(func(g Gomega) {
		fl := getFL(g, ns)
		g.Expect(fl.Status.Holder).NotTo(BeNil())
		g.Expect(fl.Status.Holder.Token).To(Equal(token))
		g.Expect(fl.Status.Holder.FirstRenewTime).NotTo(BeNil(), "the agent renewed")
		p := get(g, ns, fl.Status.Holder.PodName)
		g.Expect(p.Spec.Containers[0].Image).To(Equal(image))
		g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		name = p.Name
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return name
}

var _ = Describe("Rollouts that remove the old pod first (issue 8, section 3)", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 3, StartupDeadlineSeconds: 30}})).To(Succeed())
		startAgents(ns)
	})

	It("completes a replicas: 1 Deployment's Recreate rollout: the old holder releases by going away, the new pod gets token 2", func() {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scheduler"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1), Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
				Selector: &metav1.LabelSelector{MatchLabels: template("").Labels}, Template: template("example.invalid/scheduler:v1"),
			},
		}
		Expect(k8s.Create(ctx, d)).To(Succeed())
		old := expectHolderRunning(ns, 1, "example.invalid/scheduler:v1")

		By("rolling to v2")
		updated := rollTo(d, "example.invalid/scheduler:v2")
		expectHolderRunning(ns, 2, "example.invalid/scheduler:v2")
		granted := time.Since(updated)
		expectRolledOut(d)
		GinkgoWriter.Printf("Recreate: update → new pod granted %v, → rollout complete %v\n", granted, time.Since(updated))
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: old}, &corev1.Pod{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the old pod is gone: %v", err)
		Expect(getFL(Default, ns).Status.Revocations).To(BeZero(), "a hand-over by release, not a revocation")
	})

	It("completes a 1-replica StatefulSet's rolling update: the pod comes back under its name with token 2", func() {
		s := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scheduler"},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](1), ServiceName: "scheduler",
				Selector: &metav1.LabelSelector{MatchLabels: template("").Labels}, Template: template("example.invalid/scheduler:v1"),
			},
		}
		Expect(k8s.Create(ctx, s)).To(Succeed())
		Expect(expectHolderRunning(ns, 1, "example.invalid/scheduler:v1")).To(Equal("scheduler-0"))
		first := get(Default, ns, "scheduler-0").UID

		By("rolling to v2")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		s.Spec.Template.Spec.Containers[0].Image = "example.invalid/scheduler:v2"
		Expect(k8s.Update(ctx, s)).To(Succeed())
		Expect(expectHolderRunning(ns, 2, "example.invalid/scheduler:v2")).To(Equal("scheduler-0"))
		Expect(get(Default, ns, "scheduler-0").UID).NotTo(Equal(first), "a new pod under the same name")
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			g.Expect(s.Status.UpdateRevision).To(Equal(s.Status.CurrentRevision))
			g.Expect(s.Status.ReadyReplicas).To(BeEquivalentTo(1))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Expect(getFL(Default, ns).Status.Revocations).To(BeZero())
	})
})
