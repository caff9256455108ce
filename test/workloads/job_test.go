package workloads

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/cluster"
)

var _ = Describe("Jobs (issue 8, section 3)", func() {
	It("runs a Job's parallel pods one at a time, tokens strictly increasing, and the Job completes", func() {
		ns, grants := newWatchedNamespace()
		Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 10, StartupDeadlineSeconds: 30}})).To(Succeed())
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoice-run"},
			Spec: batchv1.JobSpec{
				Parallelism: ptr.To[int32](3), Completions: ptr.To[int32](3), BackoffLimit: ptr.To[int32](0),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{
						Labels:      map[string]string{fencingv1.LeaseLabel: "invoices"},
						Annotations: map[string]string{cluster.CompleteAfterAnnotation: "1s"}, // its work takes a second
					},
					Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{{Name: "run", Image: "example.invalid/invoice-run"}}},
				},
			},
		}
		Expect(k8s.Create(ctx, job)).To(Succeed())

		By("all three pods created at once; one granted at a time")
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(3))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			g.Expect(job.Status.Succeeded).To(BeEquivalentTo(3))
			g.Expect(job.Status.Failed).To(BeZero())
		}).WithTimeout(2 * timeout).WithPolling(poll).Should(Succeed())

		fl := getFL(Default, ns)
		Expect(fl.Status.FencingToken).To(BeEquivalentTo(3))
		Expect(fl.Status.Revocations).To(BeZero())
		tokens, err := grants.Stop()
		Expect(err).NotTo(HaveOccurred())
		Expect(tokens).To(Equal([]int64{1, 2, 3}), "pods became Holding one after another with tokens 1, 2, 3")
	})

	It("counts a revoked Job pod as a failure against backoffLimit; the retry gets the next token", func() {
		ns := newNamespace()
		Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 2, StartupDeadlineSeconds: 3}})).To(Succeed())
		a := startAgents(ns)
		a.pause(true) // the first pod never renews
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoice-run"},
			Spec: batchv1.JobSpec{
				BackoffLimit: ptr.To[int32](1),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{
						Labels:      map[string]string{fencingv1.LeaseLabel: "invoices"},
						Annotations: map[string]string{cluster.CompleteAfterAnnotation: "6s"},
					},
					Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{{Name: "run", Image: "example.invalid/invoice-run"}}},
				},
			},
		}
		Expect(k8s.Create(ctx, job)).To(Succeed())

		By("the first pod never renews: revoked at the startup deadline, deleted, and the Job counts a failure")
		Eventually(func(g Gomega) {
			rv := getFL(g, ns).Status.LastRevocation
			g.Expect(rv).NotTo(BeNil())
			g.Expect(rv.Reason).To(Equal(fencingv1.ReasonStartupDeadlineExceeded))
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			g.Expect(job.Status.Failed).To(BeEquivalentTo(1))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		By("the retry renews: token 2, and the Job succeeds within its backoffLimit")
		a.pause(false)
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			g.Expect(job.Status.Succeeded).To(BeEquivalentTo(1))
			g.Expect(job.Status.Failed).To(BeEquivalentTo(1))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		fl := getFL(Default, ns)
		Expect(fl.Status.FencingToken).To(BeEquivalentTo(2))
		Expect(fl.Status.Revocations).To(BeEquivalentTo(1))
	})
})
