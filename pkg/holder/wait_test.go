package holder

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// flakyWatchLease serves a Lease that names someone else; its first watch fails (an API
// server that is away), later ones are fake watches the test drives.
type flakyWatchLease struct {
	mu      sync.Mutex
	watches int
	gets    int
	fakes   chan *watch.FakeWatcher
}

func (f *flakyWatchLease) Leases(string) LeaseClient { return f }
func (f *flakyWatchLease) Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	return leaseNaming("a", "uid-a", 1), nil
}
func (f *flakyWatchLease) Update(context.Context, *coordinationv1.Lease, metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	return nil, errors.New("a waiter writes nothing")
}
func (f *flakyWatchLease) Watch(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watches++
	if f.watches == 1 {
		return nil, errors.New("connection refused")
	}
	if o.LabelSelector != fencingv1.LeaseLabel+"=invoices" || o.ResourceVersion != "" {
		return nil, errors.New("watch not narrowed to the FencedLease's Leases, from no version: " + o.LabelSelector + " @" + o.ResourceVersion)
	}
	w := watch.NewFake()
	f.fakes <- w
	return w, nil
}

func leaseNaming(pod, uid string, token int) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "invoices", ResourceVersion: "7", Annotations: map[string]string{
			fencingv1.TokenAnnotation: strconv.Itoa(token), fencingv1.HolderUIDAnnotation: uid}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(pod), LeaseDurationSeconds: ptr.To[int32](10)},
	}
}

// The wait survives a failed watch (reading the FencedLease's own Lease once after it,
// in case the grant is there), reads nothing while its watch works (a watch from no
// version starts with the Leases there are), skips a grant of an earlier pod of the same
// name, and returns the token of its own.
func TestWaitForGrantRetriesAndTakesOnlyItsOwnGrant(t *testing.T) {
	f := &flakyWatchLease{fakes: make(chan *watch.FakeWatcher, 2)}
	got := make(chan int64, 1)
	go func() {
		token, err := WaitForGrant(context.Background(), Config{Leases: f, Namespace: "ns", LeaseName: "invoices", Identity: "b", UID: "uid-b"})
		if err != nil {
			t.Error(err)
		}
		got <- token
	}()
	var w *watch.FakeWatcher
	select {
	case w = <-f.fakes:
	case <-time.After(5 * time.Second):
		t.Fatal("no second watch after the first failed")
	}
	w.Modify(leaseNaming("b", "uid-old-b", 2)) // a pod of the same name before this one
	select {
	case token := <-got:
		t.Fatalf("took token %d of another pod named b", token)
	case <-time.After(200 * time.Millisecond):
	}
	w.Modify(leaseNaming("b", "uid-b", 3))
	select {
	case token := <-got:
		if token != 3 {
			t.Fatalf("token %d, want 3", token)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the grant was not taken")
	}
	if f.gets != 1 || f.watches != 2 {
		t.Fatalf("%d reads and %d watches, want one read (after the failed watch) and 2 watches", f.gets, f.watches)
	}
}
