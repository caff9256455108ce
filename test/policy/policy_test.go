package policy

import (
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/test/testenv"
)

// asPod is a client that authenticates as pod (name, uid) running under service account
// worker in ns, the way a bound service account token does.
func asPod(ns, name, uid string) client.Client {
	GinkgoHelper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":worker",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		Extra: map[string][]string{
			"authentication.kubernetes.io/pod-name": {name},
			"authentication.kubernetes.io/pod-uid":  {uid},
		},
	}
	cl, err := client.New(c, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

func asUser(name string, groups ...string) client.Client {
	GinkgoHelper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: append(groups, "system:authenticated")}
	cl, err := client.New(c, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// newNamespace creates a namespace of the spec's own and returns its name.
func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "policy-"}}
	Expect(admin.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// bind grants subject the ClusterRole role in namespace ns.
func bind(ns, role string, subject rbacv1.Subject) {
	GinkgoHelper()
	Expect(testenv.BindClusterRole(ctx, admin, ns, role, subject)).To(Succeed())
}

// expectDenied asserts the write was refused by admission with message.
func expectDenied(err error, message string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred())
	Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
	Expect(err.Error()).To(ContainSubstring(message))
}

var _ = Describe("Lease policy", func() {
	var ns string
	const holderUID = "uid-of-a"

	// lease reads the Lease as the given client sees it.
	lease := func(c client.Client) *coordinationv1.Lease {
		GinkgoHelper()
		l := &coordinationv1.Lease{}
		Expect(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "invoices"}, l)).To(Succeed())
		return l
	}

	BeforeEach(func() {
		ns = newNamespace()
		bind(ns, "holder-role", rbacv1.Subject{Kind: "ServiceAccount", Name: "worker", Namespace: ns})
		// The Lease as the operator writes it for pod a, token 3.
		now := metav1.NewMicroTime(time.Now())
		Expect(admin.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: "invoices",
				Labels:      map[string]string{fencingv1.LeaseLabel: "invoices"},
				Annotations: map[string]string{fencingv1.TokenAnnotation: "3", fencingv1.HolderUIDAnnotation: holderUID},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To[int32](15),
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To[int32](3),
			},
		})).To(Succeed())
	})

	It("lets the holder renew", func() {
		a := asPod(ns, "a", holderUID)
		l := lease(a)
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		Expect(a.Update(ctx, l)).To(Succeed())
	})

	It("lets the holder release", func() {
		a := asPod(ns, "a", holderUID)
		l := lease(a)
		l.Spec.HolderIdentity = nil
		Expect(a.Update(ctx, l)).To(Succeed())
	})

	It("refuses another pod's renewal", func() {
		b := asPod(ns, "b", "uid-of-b")
		l := lease(b)
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		expectDenied(b.Update(ctx, l), "only pod a (the holder) may renew or release this Lease, not pod b")
	})

	It("refuses a pod re-created under the holder's name", func() {
		again := asPod(ns, "a", "uid-of-a-reborn")
		l := lease(again)
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		expectDenied(again.Update(ctx, l), "the requesting pod is not the holder pod (its UID differs)")
	})

	It("refuses a holder raising its token", func() {
		a := asPod(ns, "a", holderUID)
		l := lease(a)
		l.Annotations[fencingv1.TokenAnnotation] = "4"
		expectDenied(a.Update(ctx, l), "the labels, annotations (the fencing token, the holder UID), owner references and finalizers of this Lease are the operator's to write")
	})

	It("refuses a holder handing the Lease to another pod", func() {
		a := asPod(ns, "a", holderUID)
		l := lease(a)
		l.Spec.HolderIdentity = ptr.To("b")
		expectDenied(a.Update(ctx, l), "a holder may only clear holderIdentity (release), never hand the Lease to another pod")
	})

	DescribeTable("refuses a holder changing the Lease's metadata",
		func(mutate func(*coordinationv1.Lease)) {
			a := asPod(ns, "a", holderUID)
			l := lease(a)
			mutate(l)
			expectDenied(a.Update(ctx, l), "the labels, annotations (the fencing token, the holder UID), owner references and finalizers of this Lease are the operator's to write")
		},
		Entry("a label of its own", func(l *coordinationv1.Lease) { l.Labels["team"] = "billing" }),
		Entry("removing the lease label", func(l *coordinationv1.Lease) { delete(l.Labels, fencingv1.LeaseLabel) }),
		Entry("an annotation of its own", func(l *coordinationv1.Lease) { l.Annotations["note"] = "mine" }),
		Entry("raising its token", func(l *coordinationv1.Lease) { l.Annotations[fencingv1.TokenAnnotation] = "4" }),
		Entry("an owner reference (garbage collection would delete the tombstone)", func(l *coordinationv1.Lease) {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "a", UID: holderUID}}
		}),
		Entry("a finalizer", func(l *coordinationv1.Lease) { l.Finalizers = []string{"example.com/keep"} }),
	)

	It("refuses a holder stretching its lease", func() {
		a := asPod(ns, "a", holderUID)
		l := lease(a)
		l.Spec.LeaseDurationSeconds = ptr.To[int32](3600)
		expectDenied(a.Update(ctx, l), "leaseDurationSeconds, leaseTransitions, acquireTime, strategy and preferredHolder are the operator's to write")
	})

	It("refuses creating a labeled Lease to anyone but the operator", func() {
		forged := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged",
			Labels: map[string]string{fencingv1.LeaseLabel: "forged"}, Annotations: map[string]string{fencingv1.TokenAnnotation: "9223372036854775807"}}}
		expectDenied(asUser("erin", "system:masters").Create(ctx, forged), "only the operator creates Leases labeled fencing.fencedlease.io/lease (they carry fencing tokens), not erin")
		Expect(admin.Create(ctx, forged)).To(Succeed(), "the operator may")
	})

	It("lets anyone with RBAC delete the Lease once its namespace is being deleted", func() {
		root := asUser("erin", "system:masters")
		Expect(admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(root.Delete(ctx, lease(admin))).To(Succeed())
	})

	It("refuses deleting the Lease, which carries the high-water token, even to a cluster admin", func() {
		err := asPod(ns, "a", holderUID).Delete(ctx, lease(admin))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the holder role has no delete: %v", err)
		expectDenied(asUser("erin", "system:masters").Delete(ctx, lease(admin)), "only the operator may delete this Lease")
	})

	It("refuses a user who is not a pod, even with RBAC to update Leases", func() {
		bind(ns, "holder-role", rbacv1.Subject{Kind: "User", Name: "bob"})
		bob := asUser("bob")
		l := lease(bob)
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		expectDenied(bob.Update(ctx, l), "only pod a (the holder) may renew or release this Lease; the request does not come from a pod")
	})

	It("leaves the operator free to grant", func() {
		l := lease(admin)
		l.Spec.HolderIdentity = ptr.To("b")
		l.Annotations[fencingv1.TokenAnnotation] = "4"
		l.Spec.LeaseTransitions = ptr.To[int32](4)
		Expect(admin.Update(ctx, l)).To(Succeed())
	})
})

var _ = Describe("FencedLease status policy", func() {
	It("refuses status writes from anyone but the operator", func() {
		ns := newNamespace()
		fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"}}
		Expect(admin.Create(ctx, fl)).To(Succeed())
		fl.Status.FencingToken = 1
		Expect(admin.Status().Update(ctx, fl)).To(Succeed(), "the operator writes status")

		By("an editor of the namespace: RBAC gives no status")
		bind(ns, "editor-role", rbacv1.Subject{Kind: "User", Name: "carol"})
		carol := asUser("carol")
		mine := &fencingv1.FencedLease{}
		Expect(carol.Get(ctx, client.ObjectKeyFromObject(fl), mine)).To(Succeed())
		Expect(carol.Update(ctx, mine)).To(Succeed(), "editors may edit the spec")
		mine.Status.FencingToken = 100
		err := carol.Status().Update(ctx, mine)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)

		By("a cluster admin who is not the operator: the policy refuses")
		root := asUser("dave", "system:masters")
		Expect(root.Get(ctx, client.ObjectKeyFromObject(fl), mine)).To(Succeed())
		mine.Status.FencingToken = 100
		expectDenied(root.Status().Update(ctx, mine), "the status of a FencedLease is written by the operator alone, not by dave")
	})
})

var _ = Describe("Revoke request policy (issue 48)", func() {
	It("refuses a revoke-token that is not a token, with a message that says what it must be; takes a token", func() {
		ns := newNamespace()
		fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices"}}
		Expect(admin.Create(ctx, fl)).To(Succeed())
		// The API server loads a new policy asynchronously: wait until it refuses.
		Eventually(func() error {
			mine := &fencingv1.FencedLease{}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(fl), mine); err != nil {
				return err
			}
			mine.Annotations = map[string]string{fencingv1.RevokeAnnotation: "abc"}
			if err := admin.Update(ctx, mine); err == nil {
				mine.Annotations = nil
				_ = admin.Update(ctx, mine)
				return errors.New("not refused yet")
			}
			return nil
		}).WithTimeout(20 * time.Second).Should(Succeed())
		for _, bad := range []string{"abc", "0", "-1", "1.5", " 7", "07", "1234567890123456789"} {
			mine := &fencingv1.FencedLease{}
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(fl), mine)).To(Succeed())
			mine.Annotations = map[string]string{fencingv1.RevokeAnnotation: bad}
			expectDenied(admin.Update(ctx, mine), "the annotation fencing.fencedlease.io/revoke-token must be the token of the grant to revoke")
		}
		withBad := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other",
			Annotations: map[string]string{fencingv1.RevokeAnnotation: "abc"}}}
		expectDenied(admin.Create(ctx, withBad), `not "abc"`)
		mine := &fencingv1.FencedLease{}
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(fl), mine)).To(Succeed())
		mine.Annotations = map[string]string{fencingv1.RevokeAnnotation: "7", "unrelated": "x"}
		Expect(admin.Update(ctx, mine)).To(Succeed())
	})
})
