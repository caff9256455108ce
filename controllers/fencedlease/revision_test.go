package fencedlease

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func controlledBy(kind, name string, uid types.UID) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: &yes}}
}

// replicaSetOf is ReplicaSet deployment-hash of the Deployment with UID owner at revision rev.
func replicaSetOf(deployment, hash string, owner types.UID, rev string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
		Namespace: key.Namespace, Name: deployment + "-" + hash, UID: types.UID("rs-" + hash),
		Annotations:     map[string]string{deploymentRevisionAnnotation: rev},
		OwnerReferences: controlledBy("Deployment", deployment, owner),
	}}
}

// podOf is a candidate pod of ReplicaSet rs.
func podOf(rs *appsv1.ReplicaSet, name string, created time.Time) *corev1.Pod {
	p := pod(name, created)
	hash := rs.Name[len(rs.Name)-len("h1"):]
	p.Labels[podTemplateHashLabel] = hash
	p.OwnerReferences = controlledBy("ReplicaSet", rs.Name, rs.UID)
	return &p
}

func revisionReconciler(t *testing.T, objs ...client.Object) *Reconciler {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return &Reconciler{apiReader: fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()}
}

func TestNewerDeploymentRevisionIsDecidedByTheRevisionNumber(t *testing.T) {
	for _, tc := range []struct {
		name           string
		holderRev, rev string
		otherOwner     bool
		want           bool
	}{
		{name: "a rollout: higher revision", holderRev: "1", rev: "2", want: true},
		{name: "a rollback: the older template at a higher revision", holderRev: "3", rev: "4", want: true},
		{name: "an older revision waiting behind a newer holder", holderRev: "5", rev: "4"},
		{name: "another Deployment's ReplicaSet of the same name prefix", holderRev: "1", rev: "2", otherOwner: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mine := replicaSetOf("sched", "h1", "dep", tc.holderRev)
			owner := types.UID("dep")
			if tc.otherOwner {
				owner = "another-dep"
			}
			theirs := replicaSetOf("sched", "h2", owner, tc.rev)
			holder, cand := podOf(mine, "sched-h1-a", t0), podOf(theirs, "sched-h2-b", t0.Add(time.Second))
			r := revisionReconciler(t, mine, theirs)
			got, err := r.newerRevision(context.Background(), holder, []*corev1.Pod{cand})
			if err != nil {
				t.Fatal(err)
			}
			if (got != nil) != tc.want {
				t.Fatalf("newer = %v, want %v", got, tc.want)
			}
		})
	}
}

// noReads fails every read: what must cost no request uses it.
type noReads struct{ client.Reader }

func (noReads) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("an API read where none is needed")
}

func TestSameRevisionAndBarePodsNeedNoRead(t *testing.T) {
	mine := replicaSetOf("sched", "h1", "dep", "1")
	holder, standby := podOf(mine, "sched-h1-a", t0), podOf(mine, "sched-h1-b", t0)
	bare := pod("bare", t0)
	r := &Reconciler{apiReader: noReads{}}
	for _, cands := range [][]*corev1.Pod{{standby}, {&bare}} {
		if got, err := r.newerRevision(context.Background(), holder, cands); got != nil || err != nil {
			t.Fatalf("got %v, %v; want no successor", got, err)
		}
	}
	if got, _ := r.newerRevision(context.Background(), &bare, []*corev1.Pod{standby}); got != nil {
		t.Fatal("a bare holder has no workload revision")
	}
}

func TestNewerStatefulSetRevisionIsTheUpdateRevision(t *testing.T) {
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: "ledger", UID: "sts"},
		Status:     appsv1.StatefulSetStatus{CurrentRevision: "ledger-old", UpdateRevision: "ledger-new"},
	}
	member := func(name, rev string) *corev1.Pod {
		p := pod(name, t0)
		p.Labels[controllerRevisionLabel] = rev
		p.OwnerReferences = controlledBy("StatefulSet", "ledger", "sts")
		return &p
	}
	r := revisionReconciler(t, sts)
	if got, _ := r.newerRevision(context.Background(), member("ledger-0", "ledger-old"), []*corev1.Pod{member("ledger-1", "ledger-new")}); got == nil || got.Name != "ledger-1" {
		t.Fatalf("want ledger-1 (update revision), got %v", got)
	}
	if got, _ := r.newerRevision(context.Background(), member("ledger-1", "ledger-new"), []*corev1.Pod{member("ledger-0", "ledger-old")}); got != nil {
		t.Fatalf("an old-revision standby is not newer: got %v", got.Name)
	}
}
