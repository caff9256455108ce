package fencedlease_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease"
	"github.com/fencedlease/fencedlease/test/testenv"
)

var _ = Describe("Controller restart and failover", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("never reissues or lowers a token, and gives the holder a full duration after a restart", func() {
		const duration = 2 * time.Second
		_, stop := startController(ns, controllerOpts{id: "first"})
		createFL(ns, "invoices", 2, fencingv1.DeletePodPolicy)
		createPod(ns, "a", "invoices")
		createPod(ns, "b", "invoices")
		expectHolder(ns, "invoices", "a", 1)
		renew(ns, "invoices")

		By("stopping the controller for longer than the lease duration, while A is silent")
		stop()
		stoppedAt := time.Now()
		Consistently(func(g Gomega) { expectWaiting(g, ns, "b") }).
			WithTimeout(duration + 500*time.Millisecond).WithPolling(100 * time.Millisecond).Should(Succeed())
		Expect(time.Since(stoppedAt)).To(BeNumerically(">", duration))

		By("starting a new controller: A is expired by the old clock but gets a full duration from the new one")
		restartedAt := time.Now()
		startController(ns, controllerOpts{id: "second"})
		fl := expectHolder(ns, "invoices", "b", 2)
		rv := fl.Status.LastRevocation
		Expect(rv.PodName).To(Equal("a"))
		Expect(rv.Time.Sub(restartedAt)).To(BeNumerically(">=", duration), "revoked before a full duration after the restart")
		Expect(rv.Time.Sub(restartedAt)).To(BeNumerically("<", duration+2*time.Second))
		GinkgoWriter.Printf("restart→revocation: %v (duration %v)\n", rv.Time.Sub(restartedAt), duration)
	})

	It("remembers, across the candidacies of one process, when it saw the holder renew", func() {
		const duration = 2 * time.Second
		memory := fencedlease.NewMemory(clock.RealClock{})
		_, stop := startController(ns, controllerOpts{id: "term-1", memory: memory})
		createFL(ns, "invoices", 2, fencingv1.DeletePodPolicy)
		createPod(ns, "a", "invoices")
		createPod(ns, "b", "invoices")
		expectHolder(ns, "invoices", "a", 1)
		renew(ns, "invoices")
		Eventually(func(g Gomega) { expectWaiting(g, ns, "b") }).Should(Succeed())
		Eventually(func() *metav1.MicroTime { return getFL(ns, "invoices").Status.Holder.FirstRenewTime }).
			WithTimeout(timeout).ShouldNot(BeNil(), "term 1 saw the renewal")

		By("ending the term for longer than the lease, while A is silent")
		stop()
		time.Sleep(duration + 500*time.Millisecond)

		By("the next candidacy of the same process: A's lease ran out by the clock it was seen on")
		again := time.Now()
		startController(ns, controllerOpts{id: "term-2", memory: memory})
		fl := expectHolder(ns, "invoices", "b", 2)
		rv := fl.Status.LastRevocation
		Expect(rv.PodName).To(Equal("a"))
		Expect(rv.Time.Sub(again)).To(BeNumerically("<", duration),
			"revoked a whole lease after the new term began: the memory of the renewal was lost")
		GinkgoWriter.Printf("new term → revocation: %v (duration %v)\n", rv.Time.Sub(again), duration)
	})

	It("finishes a grant that crashed after G1 instead of granting twice", func() {
		createFL(ns, "invoices", 15, fencingv1.DeletePodPolicy)
		a := createPod(ns, "a", "invoices")
		createPod(ns, "b", "invoices")

		By("writing the state a controller leaves when it crashes right after the status write")
		fl := getFL(ns, "invoices")
		now := metav1.NewMicroTime(time.Now())
		fl.Status.FencingToken = 5
		fl.Status.Transitions = 5
		fl.Status.Holder = &fencingv1.Holder{PodName: "a", PodUID: a.UID, Token: 5, AcquireTime: now, LastRenewTime: &now}
		Expect(k8s.Status().Update(ctx, fl)).To(Succeed())

		By("starting the controller: it writes the Lease and the pod for token 5")
		startController(ns, controllerOpts{id: "recovering"})
		expectHolder(ns, "invoices", "a", 5)
		Consistently(func(g Gomega) {
			fl := getFL(ns, "invoices")
			g.Expect(fl.Status.FencingToken).To(BeEquivalentTo(5))
			g.Expect(fl.Status.Transitions).To(BeEquivalentTo(5))
			g.Expect(fl.Status.Holder.PodName).To(Equal("a"))
			expectWaiting(g, ns, "b")
		}).WithTimeout(time.Second).WithPolling(poll).Should(Succeed())
		Expect(getLease(Default, ns, "invoices").Spec.LeaseTransitions).To(HaveValue(BeEquivalentTo(1)))
	})

	It("continues the token sequence across an API server restart", func() {
		By("starting a control plane of this spec's own, whose serving certificate survives a restart")
		env, err := testenv.New()
		Expect(err).NotTo(HaveOccurred())
		testenv.Restartable(env, GinkgoT().TempDir())
		ownCfg, err := env.Start()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(env.Stop)
		own, err := client.NewWithWatch(ownCfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())

		nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restart"}}
		Expect(own.Create(ctx, nsObj)).To(Succeed())
		By("watching grants on the control plane that restarts: the oracle must follow it through")
		oracle, err := testenv.WatchGrants(ctx, own, "restart")
		Expect(err).NotTo(HaveOccurred())
		startControllerOn(ownCfg, "restart", controllerOpts{id: "ctrl"})
		Expect(own.Create(ctx, &fencingv1.FencedLease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "restart", Name: "invoices"},
		})).To(Succeed())
		for _, name := range []string{"p1", "p2"} {
			Expect(own.Create(ctx, candidatePod("restart", name, "invoices"))).To(Succeed())
		}
		holder := func(g Gomega) (string, int64) {
			fl := &fencingv1.FencedLease{}
			g.Expect(own.Get(ctx, client.ObjectKey{Namespace: "restart", Name: "invoices"}, fl)).To(Succeed())
			g.Expect(fl.Status.Holder).NotTo(BeNil())
			return fl.Status.Holder.PodName, fl.Status.FencingToken
		}
		Eventually(func(g Gomega) {
			name, token := holder(g)
			g.Expect(name).To(Equal("p1"))
			g.Expect(token).To(BeEquivalentTo(1))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		By("restarting the API server")
		apiServer := env.ControlPlane.GetAPIServer()
		began := time.Now()
		Expect(apiServer.Stop()).To(Succeed())
		GinkgoWriter.Printf("api server stopped in %v\n", time.Since(began))
		Expect(apiServer.Start()).To(Succeed())

		By("releasing p1: the controller reconnects and grants p2 the next token")
		Eventually(func(g Gomega) {
			p := &corev1.Pod{}
			g.Expect(own.Get(ctx, client.ObjectKey{Namespace: "restart", Name: "p1"}, p)).To(Succeed())
			p.Status.Phase = corev1.PodSucceeded
			g.Expect(own.Status().Update(ctx, p)).To(Succeed())
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			name, token := holder(g)
			g.Expect(name).To(Equal("p2"))
			g.Expect(token).To(BeEquivalentTo(2))
		}).WithTimeout(30 * time.Second).WithPolling(poll).Should(Succeed())

		// p2 became Holding after the restart: an oracle that went blind would miss it.
		Eventually(func(g Gomega) {
			p := &corev1.Pod{}
			g.Expect(own.Get(ctx, client.ObjectKey{Namespace: "restart", Name: "p2"}, p)).To(Succeed())
			g.Expect(p.Annotations).To(HaveKeyWithValue(fencingv1.StateAnnotation, string(fencingv1.PodHolding)))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		Eventually(func() int { resumes, _ := oracle.Resumes(); return resumes }).WithTimeout(timeout).Should(BeNumerically(">=", 1))
		Eventually(oracle.Tokens).WithTimeout(timeout).WithPolling(poll).Should(Equal([]int64{1, 2}), "the oracle saw both grants, across the restart")
		_, err = oracle.Stop()
		Expect(err).NotTo(HaveOccurred(), "the grant oracle")
	})

	It("keeps tokens strictly increasing and one pod granted at a time when the leader dies mid-flight", func() {
		watcher := watchGrants(ns)
		mgrA, stopA := startController(ns, controllerOpts{id: "replica-a", leaderElection: true})
		mgrB, stopB := startController(ns, controllerOpts{id: "replica-b", leaderElection: true})
		leaderStop, standby := stopA, mgrB
		select {
		case <-mgrA.Elected():
		case <-mgrB.Elected():
			leaderStop, standby = stopB, mgrA
		case <-time.After(timeout):
			Fail("no replica became leader")
		}

		createFL(ns, "invoices", 1, fencingv1.DeletePodPolicy)
		for _, p := range []string{"p1", "p2", "p3"} {
			createPod(ns, p, "invoices")
		}
		expectHolder(ns, "invoices", "p1", 1)

		By("killing the leader without releasing leadership while p1 is expiring")
		leaderStop()
		Eventually(standby.Elected()).WithTimeout(timeout).Should(BeClosed())
		expectHolder(ns, "invoices", "p2", 2)
		deletePod(ns, "p2")
		expectHolder(ns, "invoices", "p3", 3)

		tokens, err := watcher.Stop()
		Expect(err).NotTo(HaveOccurred())
		Expect(tokens).To(Equal([]int64{1, 2, 3}), "tokens in the order pods were marked Holding")
	})
})
