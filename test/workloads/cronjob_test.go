package workloads

import (
	"maps"
	"slices"
	"time"

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

// jobFrom instantiates a CronJob's job template by hand, as `kubectl create job --from
// cronjob/NAME` does: a run beside the scheduled ones.
func jobFrom(cj *batchv1.CronJob, name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: cj.Namespace, Name: name,
			Annotations:     map[string]string{"cronjob.kubernetes.io/instantiate": "manual"},
			Labels:          maps.Clone(cj.Spec.JobTemplate.Labels),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))},
		},
		Spec: *cj.Spec.JobTemplate.Spec.DeepCopy(),
	}
}

var _ = Describe("CronJobs (issue 8, section 3)", func() {
	It("runs overlapping runs of a CronJob one at a time, tokens strictly increasing; the scheduled run takes the next token", func() {
		ns, grants := newWatchedNamespace()
		Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"},
			Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: 10, StartupDeadlineSeconds: 30}})).To(Succeed())
		startAgents(ns)
		cj := &batchv1.CronJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoice-run"},
			Spec: batchv1.CronJobSpec{
				Schedule: "* * * * *", ConcurrencyPolicy: batchv1.AllowConcurrent, // runs may overlap
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
					BackoffLimit: ptr.To[int32](0),
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{
							Labels:      map[string]string{fencingv1.LeaseLabel: "invoices"},
							Annotations: map[string]string{cluster.CompleteAfterAnnotation: "2s"},
						},
						Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
							Containers: []corev1.Container{{Name: "run", Image: "example.invalid/invoice-run"}}},
					},
				}},
			},
		}
		Expect(k8s.Create(ctx, cj)).To(Succeed())

		By("two runs started at once by hand: both pods exist, one holds at a time")
		for _, name := range []string{"manual-a", "manual-b"} {
			Expect(k8s.Create(ctx, jobFrom(cj, name))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			// At least: the schedule's own run may already be there, if a minute began.
			g.Expect(len(pods.Items)).To(BeNumerically(">=", 2))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		By("the CronJob controller's own run (at the next minute) also gets its turn")
		Eventually(func(g Gomega) {
			jobs := &batchv1.JobList{}
			g.Expect(k8s.List(ctx, jobs, client.InNamespace(ns))).To(Succeed())
			succeeded := map[string]bool{}
			for _, j := range jobs.Items {
				g.Expect(j.Status.Failed).To(BeZero(), "job %s", j.Name)
				succeeded[j.Name] = j.Status.Succeeded == 1
			}
			g.Expect(succeeded).To(HaveKeyWithValue("manual-a", true))
			g.Expect(succeeded).To(HaveKeyWithValue("manual-b", true))
			g.Expect(len(succeeded)).To(BeNumerically(">=", 3), "a scheduled run too")
			g.Expect(slices.Collect(maps.Values(succeeded))).To(HaveEach(BeTrue()))
		}).WithTimeout(100 * time.Second).WithPolling(poll).Should(Succeed()) // the next minute comes within 60s

		tokens, err := grants.Stop()
		Expect(err).NotTo(HaveOccurred())
		Expect(len(tokens)).To(BeNumerically(">=", 3))
		Expect(tokens[:3]).To(Equal([]int64{1, 2, 3}), "pods became Holding one after another")
		Expect(getFL(Default, ns).Status.Revocations).To(BeZero())
	})
})
