package authority

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlease/fencedlease/controllers/admissioncheck"
	"github.com/fencedlease/fencedlease/test/testenv"
)

var _ = Describe("The operator's start-up check of its admission policies (issue 7, item 5)", func() {
	newChecker := func(as client.Client) (*admissioncheck.Checker, *events.FakeRecorder) {
		rec := events.NewFakeRecorder(10)
		return &admissioncheck.Checker{Client: as, Recorder: rec, Metrics: admissioncheck.NewMetrics(prometheus.NewRegistry())}, rec
	}

	It("finds the shipped policies, bindings and parameter in place, reading them with the operator's own RBAC", func() {
		c, rec := newChecker(operator)
		c.AgentImage = "fencedlease-agent:dev" // the bundle's, in the operator's AGENT_IMAGE and the parameter
		Expect(c.Check(ctx)).To(BeEmpty())
		Expect(rec.Events).To(BeEmpty())
		for _, p := range append(admissioncheck.Policies, admissioncheck.CandidatePolicy) {
			Expect(testutil.ToFloat64(metricOf(c, p))).To(BeEquivalentTo(1), p)
		}
	})

	It("says so when the parameter names another identity, as after deploying under another namespace", func() {
		other, err := client.New(testenv.AsUser(cfg, "system:serviceaccount:ops:fencedlease-controller-manager",
			[]string{"system:serviceaccounts", "system:masters"}, nil), client.Options{Scheme: testenv.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		c, rec := newChecker(other)
		problems := c.Check(ctx)
		// Every policy with a parameter: fencedlease-candidate-check exempts no one.
		Expect(problems).To(HaveLen(len(admissioncheck.Policies) - 1))
		Expect(problems["fencedlease-pod"]).To(ContainSubstring(`parameter ConfigMap fencedlease-system/fencedlease-admission-params names the operator "` +
			testenv.OperatorUser + `", but this operator runs as "system:serviceaccount:ops:fencedlease-controller-manager"`))
		Expect(rec.Events).To(HaveLen(len(admissioncheck.Policies) - 1))
		Expect(testutil.ToFloat64(metricOf(c, "fencedlease-status"))).To(BeZero())

		By("and the policies do deny that operator its own writes, as the check warned")
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "other-"}}
		Expect(k8s.Create(ctx, ns)).To(Succeed())
		expectDenied(other.Create(ctx, leaseLabeled(ns.Name, "invoices")), "only the operator creates Leases labeled")
	})
})
