package fencedlease_test

import (
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
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

	It("finishes a grant that crashed after step 1 instead of granting twice", func() {
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

		Expect(watcher.stop()).To(Equal([]int64{1, 2, 3}), "tokens in the order pods were marked Holding")
	})
})

// grantWatcher follows pods as they change and fails if two are ever marked Holding at
// once; it records each token as its pod becomes Holding.
type grantWatcher struct {
	w      watch.Interface
	done   chan struct{}
	mu     sync.Mutex
	tokens []int64
}

func watchGrants(ns string) *grantWatcher {
	GinkgoHelper()
	w, err := k8s.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns))
	Expect(err).NotTo(HaveOccurred())
	gw := &grantWatcher{w: w, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(gw.done)
		holding := map[string]int64{}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			_, was := holding[p.Name]
			if ev.Type == watch.Deleted || p.Annotations[fencingv1.StateAnnotation] != string(fencingv1.PodHolding) {
				delete(holding, p.Name)
				continue
			}
			token, err := strconv.ParseInt(p.Annotations[fencingv1.TokenAnnotation], 10, 64)
			Expect(err).NotTo(HaveOccurred())
			holding[p.Name] = token
			Expect(holding).To(HaveLen(1), "two pods marked Holding at once")
			if !was {
				gw.mu.Lock()
				gw.tokens = append(gw.tokens, token)
				gw.mu.Unlock()
			}
		}
	}()
	return gw
}

func (gw *grantWatcher) stop() []int64 {
	gw.w.Stop()
	<-gw.done
	gw.mu.Lock()
	defer gw.mu.Unlock()
	return gw.tokens
}
