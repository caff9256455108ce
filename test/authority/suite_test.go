// Package authority tests that nobody but the operator can forge, steal or silently lose
// a grant: the operator runs as its shipped service account, with the install bundle's
// RBAC and admission policies — the default install: candidates admitted by the API
// server alone, no webhook at all — while specs act as users with the built-in edit and admin roles, as cluster
// admins, and as pods.
package authority

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

var (
	ctx = context.Background()
	cfg *rest.Config
	// k8s is the test's own admin (not the operator): it sets up and reads, uncached.
	k8s client.WithWatch
	// operator acts as the operator's service account.
	operator client.Client
)

const (
	timeout = 15 * time.Second
	poll    = 50 * time.Millisecond
)

func TestAuthority(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Authority: operator and policies as shipped, no webhook (envtest)")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	env, err := testenv.New()
	Expect(err).NotTo(HaveOccurred())
	cfg, err = env.Start()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(env.Stop)
	k8s, err = client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	operator, err = client.New(testenv.AsOperator(cfg), client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())

	By("installing the bundle as shipped: RBAC, the policies and their parameter")
	Expect(testenv.InstallBundle(ctx, k8s, "CustomResourceDefinition", "Deployment", "Service")).To(Succeed())
	aggregateClusterRoles()
	waitForPolicies()
})

// aggregateClusterRoles does what kube-controller-manager's clusterrole-aggregation
// controller would (envtest runs none): the built-in admin, edit and view roles gain the
// rules of the ClusterRoles labeled to aggregate into them, such as the bundle's
// FencedLease roles. They nest (view into edit, edit into admin): three passes settle them.
func aggregateClusterRoles() {
	for range 3 {
		aggregateOnce()
	}
}

func aggregateOnce() {
	roles := &rbacv1.ClusterRoleList{}
	Expect(k8s.List(ctx, roles)).To(Succeed())
	for i := range roles.Items {
		target := &roles.Items[i]
		if target.AggregationRule == nil {
			continue
		}
		var rules []rbacv1.PolicyRule
		for _, sel := range target.AggregationRule.ClusterRoleSelectors {
			selector, err := metav1.LabelSelectorAsSelector(&sel)
			Expect(err).NotTo(HaveOccurred())
			for _, source := range roles.Items {
				if source.Name != target.Name && selector.Matches(labels.Set(source.Labels)) {
					rules = append(rules, source.Rules...)
				}
			}
		}
		target.Rules = rules
		Expect(k8s.Update(ctx, target)).To(Succeed())
	}
}

// waitForPolicies waits until the API server enforces every policy (it loads them
// asynchronously), probing in a namespace of its own.
func waitForPolicies() {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	root := asUser("probe-root", "system:masters")
	Expect(k8s.Create(ctx, &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "probe"}})).To(Succeed())
	Eventually(func() error {
		return root.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns.Name, GenerateName: "probe-", Labels: map[string]string{fencingv1.LeaseLabel: "probe"}}})
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(HaveOccurred())
	p := newPod(ns.Name, "probe", "probe")
	Expect(root.Create(ctx, p)).To(Succeed())
	Eventually(func() error {
		q := &corev1.Pod{}
		if err := root.Get(ctx, client.ObjectKeyFromObject(p), q); err != nil {
			return err
		}
		q.Spec.SchedulingGates = nil
		return root.Update(ctx, q)
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(HaveOccurred())
	fl := &fencingv1.FencedLease{}
	Eventually(func() error {
		if err := root.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "probe"}, fl); err != nil {
			return err
		}
		fl.Status.FencingToken = 7
		return root.Status().Update(ctx, fl)
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(HaveOccurred())
}
