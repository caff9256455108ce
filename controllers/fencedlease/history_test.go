package fencedlease

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// world is the model the generated histories drive: the real Reconciler (decide, run,
// remember) over a fake API server and a fake clock, and around it everything the
// protocol lets move on its own — holders that renew, pause, release or die, pods a
// workload controller deletes and re-creates under the same name, users who change the
// spec, ask for a revocation or take a label off, an operator killed between two of its
// writes and restarted with nothing remembered. After every action the invariants are
// checked on the API server's objects; rapid shrinks a failure to its shortest history.
type historyWorld struct {
	f      *casFixture
	v      *invariants
	paused map[types.UID]bool // holders that stopped renewing (a pause, a dead process)
	born   map[string]int     // how many pods of each name were created (a new UID each)
	// minRaised: spec.minFencingToken was raised, so tokens may skip.
	minRaised bool
	pods      int
	// before is the API server's objects as they were one action ago: what an informer
	// one event behind would show.
	before []client.Object
	// revision is the StatefulSet's update revision: the one new pods are created from.
	revision string
	// forged are the pods no webhook admitted (A1): labeled after they were created.
	forged map[types.UID]bool
	// foreign is a Lease of a slot's name a user wrote without the lease label (A3).
	foreign *coordinationv1.Lease
	// saw are the outcomes this history reached (a hand-off asked, each revocation
	// reason): what the generated histories explore, counted over all of them.
	saw map[string]bool
}

// sawOutcomes notes the outcomes the objects show now.
func (w *historyWorld) sawOutcomes(rt *rapid.T) {
	for _, rec := range w.held(rt) {
		if rec.Successor != "" {
			w.saw["a hand-off asked"] = true
		}
	}
	fl := &fencingv1.FencedLease{}
	if w.f.c.Get(context.Background(), key, fl) != nil {
		return
	}
	if fl.Status.Transitions > 1 {
		w.saw["two grants or more"] = true
	}
	revocations := []*fencingv1.Revocation{fl.Status.LastRevocation}
	for _, s := range fl.Status.Slots {
		revocations = append(revocations, s.LastRevocation)
	}
	for _, rv := range revocations {
		if rv != nil {
			w.saw["revoked "+string(rv.Reason)] = true
		}
	}
}

// workload is the StatefulSet whose pods the histories create: a rolling update gives
// its new pods another revision (H1).
const workload = "p"

var workloadUID = types.UID("uid-statefulset-p")

// snapshot keeps the objects as they are now, for a later pass on a stale view.
func (w *historyWorld) snapshot(*rapid.T) { w.before = objectsOf(w.f.c) }

// objectsOf is a copy of every FencedLease, Lease and pod c holds.
func objectsOf(c client.Client) []client.Object {
	var out []client.Object
	ctx := context.Background()
	fls, leases, pods := &fencingv1.FencedLeaseList{}, &coordinationv1.LeaseList{}, &corev1.PodList{}
	_ = c.List(ctx, fls)
	_ = c.List(ctx, leases)
	_ = c.List(ctx, pods)
	for i := range fls.Items {
		out = append(out, fls.Items[i].DeepCopy())
	}
	for i := range leases.Items {
		out = append(out, leases.Items[i].DeepCopy())
	}
	for i := range pods.Items {
		out = append(out, pods.Items[i].DeepCopy())
	}
	return out
}

// onView runs one pass of f's operator reading the objects given (a cache behind), and
// writing to the API server, where a write with an old resourceVersion is refused.
func (f *casFixture) onView(objs []client.Object) error {
	copies := make([]client.Object, len(objs))
	for i, o := range objs {
		copies[i] = o.DeepCopyObject().(client.Object)
	}
	stale := fixtureOf(copies...).c
	real, pods := f.r.Client, f.r.pods
	f.r.Client, f.r.pods = staleView{Client: real, stale: stale}, labeledPods{stale}
	defer func() { f.r.Client, f.r.pods = real, pods }()
	_, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	return err
}

// staleView reads what the cache would show one action behind, and writes to the API
// server, where a write carrying an old resourceVersion is refused (a stale read).
type staleView struct {
	client.Client
	stale client.Reader
}

func (s staleView) Get(ctx context.Context, k client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	return s.stale.Get(ctx, k, o, opts...)
}

func (s staleView) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	return s.stale.List(ctx, l, opts...)
}

// podNames are the pod names a history uses: few, so names are re-used (a StatefulSet).
var podNames = []string{"p-0", "p-1", "p-2", "p-3"}

// create makes a candidate as admission leaves it (gated, no standby: the operator lets it
// run if the FencedLease is Warm then, W1), or with warm one the operator let run before,
// already running.
func (w *historyWorld) create(rt *rapid.T, name string, warm bool, ordinal bool) {
	w.born[name]++
	p := pod(name, t0.Add(time.Duration(w.pods)*time.Second))
	w.pods++
	p.UID = types.UID(fmt.Sprintf("uid-%s-%d", name, w.born[name]))
	p.CreationTimestamp.Time = w.f.clock.Now().Add(time.Duration(w.pods) * time.Millisecond)
	if warm {
		p = func(q corev1.Pod) corev1.Pod {
			q.Annotations[fencingv1.StandbyAnnotation] = string(fencingv1.StandbyWarm)
			q.Spec.SchedulingGates = nil
			q.Status.Phase = corev1.PodRunning
			return q
		}(p)
	}
	if ordinal {
		p.Labels["apps.kubernetes.io/pod-index"] = name[len(name)-1:]
	}
	p.OwnerReferences = controlledBy("StatefulSet", workload, workloadUID)
	p.Labels[controllerRevisionLabel] = w.revision
	if !createWithStatus(rt, w.f.c, &p) {
		return // a pod of that name is there still
	}
	w.v.note("pod %s created (uid %s, warm=%v)", name, p.UID, warm)
}

// createWithStatus creates p and then writes its status (a create drops it, as the API
// server does); false when a pod of its name exists.
func createWithStatus(rt *rapid.T, c client.Client, p *corev1.Pod) bool {
	status := p.Status
	switch err := c.Create(context.Background(), p); {
	case apierrors.IsAlreadyExists(err):
		return false
	case err != nil:
		rt.Fatalf("creating pod %s: %v", p.Name, err)
	}
	p.Status = status
	if err := c.Status().Update(context.Background(), p); err != nil {
		rt.Fatalf("writing pod %s's status: %v", p.Name, err)
	}
	return true
}

// statusLine is the status in short, for the history.
func (w *historyWorld) statusLine() string {
	fl := &fencingv1.FencedLease{}
	if err := w.f.c.Get(context.Background(), key, fl); err != nil {
		return "no FencedLease"
	}
	return fmt.Sprintf("token %d transitions %d holder %s slots %s", fl.Status.FencingToken, fl.Status.Transitions, holderLine(fl.Status.Holder), slotsLine(fl.Status.Slots))
}

// reconcile runs one pass; a pass that hit a stale read asks to run again, and says so
// in its result, not as an error.
func (w *historyWorld) reconcile(rt *rapid.T) {
	if _, err := w.f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil && !errors.Is(err, errCrashed) {
		rt.Fatalf("reconcile: %v\nhistory:\n  %s", err, joinLines(w.v.history))
	}
}

// leases are the FencedLease's Leases (a user's, without the lease label, are not).
func (w *historyWorld) leases(rt *rapid.T) []coordinationv1.Lease {
	l := &coordinationv1.LeaseList{}
	if err := w.f.c.List(context.Background(), l, client.InNamespace(key.Namespace), client.MatchingLabels{fencingv1.LeaseLabel: key.Name}); err != nil {
		rt.Fatalf("%v", err)
	}
	return l.Items
}

// held are the records of the Leases that name a holder.
func (w *historyWorld) held(rt *rapid.T) []leaserecord.Record {
	var out []leaserecord.Record
	for _, l := range w.leases(rt) {
		if rec := leaserecord.Read(&l); rec.Holder != "" {
			out = append(out, rec)
		}
	}
	return out
}

func (w *historyWorld) podList(rt *rapid.T) []corev1.Pod {
	l := &corev1.PodList{}
	if err := w.f.c.List(context.Background(), l, client.InNamespace(key.Namespace)); err != nil {
		rt.Fatalf("%v", err)
	}
	return l.Items
}

// renewAll is every holder the Leases name renewing, unless it is paused or gone (R1: a
// holder renews only while the Lease names it, with its token).
func (w *historyWorld) renewAll(rt *rapid.T) {
	alive := map[types.UID]bool{}
	for _, p := range w.podList(rt) {
		alive[p.UID] = p.DeletionTimestamp == nil
	}
	for _, l := range w.leases(rt) {
		rec := leaserecord.Read(&l)
		if rec.Holder == "" || !alive[rec.HolderUID] || w.paused[rec.HolderUID] {
			continue
		}
		leaserecord.Renew(&l, w.f.clock.Now())
		if err := w.f.c.Update(context.Background(), &l); err != nil && !apierrors.IsConflict(err) {
			rt.Fatalf("renewing: %v", err)
		}
	}
}

func (w *historyWorld) editFL(rt *rapid.T, what string, change func(*fencingv1.FencedLease)) {
	fl := &fencingv1.FencedLease{}
	if err := w.f.c.Get(context.Background(), key, fl); err != nil {
		return // deleted
	}
	change(fl)
	if err := w.f.c.Update(context.Background(), fl); err != nil && !apierrors.IsConflict(err) {
		rt.Fatalf("%s: %v", what, err)
	}
	w.v.note("%s", what)
}

// historyActions are the actions of a history, each named by the protocol step it
// carries out or the fault it injects (doc.go's IDs: protocol_ids_test.go checks them).
func (w *historyWorld) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"G1 G2 G3 G4 L3 X2 X3 X4 X5 X6 X8 C1 C2 Q2 H3 D1 N1 N2 N3 N4 N5 P1 the operator runs a pass": func(rt *rapid.T) {
			w.reconcile(rt)
			w.v.note("pass → %s", w.statusLine())
		},
		"R2 time passes": func(rt *rapid.T) {
			d := time.Duration(rapid.IntRange(100, 12000).Draw(rt, "ms")) * time.Millisecond
			w.f.clock.Step(d)
			w.v.note("%v passes", d)
		},
		"R1 the holders renew": func(rt *rapid.T) {
			w.renewAll(rt)
			w.v.note("holders renew")
		},
		"X2 a holder pauses or wakes": func(rt *rapid.T) {
			var named []types.UID
			for _, rec := range w.held(rt) {
				named = append(named, rec.HolderUID)
			}
			if len(named) == 0 {
				rt.Skip("no holder")
			}
			uid := rapid.SampledFrom(named).Draw(rt, "holder")
			w.paused[uid] = !w.paused[uid]
			w.v.note("holder %s paused=%v", uid, w.paused[uid])
		},
		"L2 H2 a holder releases": func(rt *rapid.T) {
			var named []coordinationv1.Lease
			for _, l := range w.leases(rt) {
				if rec := leaserecord.Read(&l); rec.Holder != "" && !w.paused[rec.HolderUID] {
					named = append(named, l)
				}
			}
			if len(named) == 0 {
				rt.Skip("no holder")
			}
			l := named[rapid.IntRange(0, len(named)-1).Draw(rt, "lease")]
			leaserecord.Release(&l)
			if err := w.f.c.Update(context.Background(), &l); err != nil && !apierrors.IsConflict(err) {
				rt.Fatalf("releasing: %v", err)
			}
			w.v.note("the holder of Lease %s releases", l.Name)
		},
		"X1 a pass on a view one action behind": func(rt *rapid.T) {
			if len(w.before) == 0 {
				rt.Skip("no view yet")
			}
			behind := map[string]func(client.Object) bool{
				"every kind":      func(client.Object) bool { return true },
				"the FencedLease": isKind[*fencingv1.FencedLease],
				"the Leases":      isKind[*coordinationv1.Lease],
				"the pods":        isKind[*corev1.Pod],
			}
			which := rapid.SampledFrom(slices.Sorted(maps.Keys(behind))).Draw(rt, "behind")
			if err := w.f.onView(mixedView(w.before, objectsOf(w.f.c), behind[which])); err != nil {
				rt.Fatalf("a pass on a stale view: %v", err)
			}
			w.v.note("pass on a view with %s one action behind → %s", which, w.statusLine())
		},
		"X4 the operator is killed mid-pass and restarted": func(rt *rapid.T) {
			k := rapid.IntRange(0, 4).Draw(rt, "writes before the kill")
			real := w.f.r.Client
			w.f.r.Client = &crashingClient{Client: real, budget: k}
			w.reconcile(rt)
			w.f.r.Client = real
			w.f.restart()
			w.v.note("pass killed after %d write(s); restarted → %s", k, w.statusLine())
		},
		"G1 H1 H4 H5 L1 X7 X9 W1 a workload moves":               func(rt *rapid.T) { oneOf(rt, w.podActions()) },
		"H6 Q1 G1 A1 A2 A3 D1 W1 W2 W3 a user changes something": func(rt *rapid.T) { oneOf(rt, w.userActions()) },
		"": func(rt *rapid.T) {
			w.v.check(rt, w.f.c)
			w.checkAuthority(rt)
			w.sawOutcomes(rt)
			w.snapshot(rt)
		},
	}
}

// checkAuthority: a pod no admission admitted is never granted (A1);
// a Lease without the lease label is never written (A3).
func (w *historyWorld) checkAuthority(rt *rapid.T) {
	for _, p := range w.podList(rt) {
		_, token := p.Annotations[fencingv1.TokenAnnotation]
		if w.forged[p.UID] && (grantorder.PodState(&p) == fencingv1.PodHolding || token) {
			rt.Fatalf("pod %s, never admitted, was granted: %v\nhistory:\n  %s", p.Name, p.Annotations, joinLines(w.v.history))
		}
	}
	if w.foreign == nil {
		return
	}
	now := &coordinationv1.Lease{}
	if err := w.f.c.Get(context.Background(), client.ObjectKeyFromObject(w.foreign), now); err != nil || now.ResourceVersion != w.foreign.ResourceVersion {
		rt.Fatalf("Lease %s, written by a user without the lease label, was written or deleted (%v)\nhistory:\n  %s", w.foreign.Name, err, joinLines(w.v.history))
	}
}

// podActions are what a workload's pods and their controller do: one action of a history.
func (w *historyWorld) podActions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"L1 a pod is deleted, and re-created under its name": func(rt *rapid.T) {
			pods := w.podList(rt)
			if len(pods) == 0 {
				rt.Skip("no pod")
			}
			p := pods[rapid.IntRange(0, len(pods)-1).Draw(rt, "pod")]
			if err := w.f.c.Delete(context.Background(), &p); err != nil && !apierrors.IsNotFound(err) {
				rt.Fatalf("deleting: %v", err)
			}
			w.v.note("pod %s (%s) deleted", p.Name, p.UID)
			if rapid.Bool().Draw(rt, "re-create") {
				w.create(rt, p.Name, rapid.Bool().Draw(rt, "warm"), true)
			}
		},
		"W1 a candidate the operator let run starts running": func(rt *rapid.T) {
			var let []corev1.Pod
			for _, p := range w.podList(rt) {
				if grantorder.Warm(&p) && len(p.Spec.SchedulingGates) == 0 && p.Status.Phase == "" {
					let = append(let, p)
				}
			}
			if len(let) == 0 {
				rt.Skip("no Warm candidate the operator let run")
			}
			p := let[rapid.IntRange(0, len(let)-1).Draw(rt, "pod")]
			p.Status.Phase = corev1.PodRunning
			if err := w.f.c.Status().Update(context.Background(), &p); err != nil && !apierrors.IsConflict(err) {
				rt.Fatalf("%v", err)
			}
			w.v.note("pod %s, let run, is running", p.Name)
		},
		"G1 a candidate arrives": func(rt *rapid.T) {
			name := rapid.SampledFrom(podNames).Draw(rt, "name")
			w.create(rt, name, rapid.Bool().Draw(rt, "warm"), true)
		},
		"H1 H4 H5 a rolling update starts, or rolls back": func(rt *rapid.T) {
			w.revision = map[string]string{"r1": "r2", "r2": "r1"}[w.revision]
			sts := &appsv1.StatefulSet{}
			if err := w.f.c.Get(context.Background(), types.NamespacedName{Namespace: key.Namespace, Name: workload}, sts); err != nil {
				rt.Fatalf("%v", err)
			}
			sts.Status.UpdateRevision = w.revision
			if err := w.f.c.Update(context.Background(), sts); err != nil {
				rt.Fatalf("%v", err)
			}
			w.v.note("the StatefulSet's update revision is %s", w.revision)
		},
		"X7 X9 a holder's container cannot start or run, or recovers": func(rt *rapid.T) {
			named := map[types.UID]bool{}
			for _, rec := range w.held(rt) {
				named[rec.HolderUID] = true
			}
			var started []corev1.Pod
			for _, p := range w.podList(rt) {
				if named[p.UID] {
					started = append(started, p)
				}
			}
			if len(started) == 0 {
				rt.Skip("no holder")
			}
			p := started[rapid.IntRange(0, len(started)-1).Draw(rt, "pod")]
			reason := rapid.SampledFrom([]string{"", "CrashLoopBackOff", "ImagePullBackOff"}).Draw(rt, "waiting")
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app"}}
			if reason != "" {
				p.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: reason}
			}
			if err := w.f.c.Status().Update(context.Background(), &p); err != nil && !apierrors.IsConflict(err) {
				rt.Fatalf("%v", err)
			}
			w.v.note("pod %s's container: %q", p.Name, reason)
		},
	}
}

// userActions are what a user with the edit role does: one action of a history.
func (w *historyWorld) userActions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"H6 spec.holders changes": func(rt *rapid.T) {
			n := int32(rapid.IntRange(1, 3).Draw(rt, "holders"))
			w.editFL(rt, fmt.Sprintf("spec.holders = %d", n), func(fl *fencingv1.FencedLease) { fl.Spec.Holders = n })
		},
		"Q1 a revocation is requested": func(rt *rapid.T) {
			var tokens []int64
			for _, rec := range w.held(rt) {
				tokens = append(tokens, rec.Token)
			}
			if len(tokens) == 0 {
				rt.Skip("no holder")
			}
			tok := rapid.SampledFrom(tokens).Draw(rt, "token")
			w.editFL(rt, fmt.Sprintf("revoke token %d requested", tok), func(fl *fencingv1.FencedLease) {
				if fl.Annotations == nil {
					fl.Annotations = map[string]string{}
				}
				fl.Annotations[fencingv1.RevokeAnnotation] = strconv.FormatInt(tok, 10)
			})
		},
		"W1 spec.standby is switched": func(rt *rapid.T) {
			w.editFL(rt, "spec.standby switched", func(fl *fencingv1.FencedLease) {
				fl.Spec.Standby = map[fencingv1.StandbyMode]fencingv1.StandbyMode{fencingv1.StandbyWarm: fencingv1.StandbyCold}[fl.Spec.Standby]
				if fl.Spec.Standby == "" {
					fl.Spec.Standby = fencingv1.StandbyWarm
				}
			})
		},
		"G1 suspend is switched": func(rt *rapid.T) {
			w.editFL(rt, "suspend switched", func(fl *fencingv1.FencedLease) { fl.Spec.Suspend = !fl.Spec.Suspend })
		},
		"G1 minFencingToken is raised": func(rt *rapid.T) {
			w.minRaised = true
			w.editFL(rt, "minFencingToken raised", func(fl *fencingv1.FencedLease) { fl.Spec.MinFencingToken = fl.Status.FencingToken + 5 })
		},
		"D1 W2 the FencedLease is deleted": func(rt *rapid.T) {
			if rapid.IntRange(0, 3).Draw(rt, "rarely") > 0 {
				rt.Skip("deleted in one draw of four: most histories keep their FencedLease")
			}
			fl := &fencingv1.FencedLease{}
			if err := w.f.c.Get(context.Background(), key, fl); err != nil {
				rt.Skip("deleted already")
			}
			if err := w.f.c.Delete(context.Background(), fl); err != nil && !apierrors.IsNotFound(err) {
				rt.Fatalf("deleting the FencedLease: %v", err)
			}
			w.v.note("the FencedLease is deleted")
		},
		"A2 a user takes the lease label off a pod": func(rt *rapid.T) {
			pods := w.podList(rt)
			if len(pods) == 0 {
				rt.Skip("no pod")
			}
			p := pods[rapid.IntRange(0, len(pods)-1).Draw(rt, "pod")]
			delete(p.Labels, fencingv1.LeaseLabel)
			if err := w.f.c.Update(context.Background(), &p); err != nil && !apierrors.IsConflict(err) {
				rt.Fatalf("unlabeling: %v", err)
			}
			w.v.note("lease label taken off pod %s", p.Name)
		},
		"A1 W3 a labeled pod admission never saw appears, running (created before the policies were loaded, or labeled by hand)": func(rt *rapid.T) {
			name := fmt.Sprintf("labeled-later-%d", len(w.forged))
			p := pod(name, w.f.clock.Now())
			p.UID = types.UID("uid-" + name)
			delete(p.Annotations, fencingv1.StateAnnotation) // kubectl label: no admission ran
			p.Spec.SchedulingGates = nil
			p.Status.Phase = corev1.PodRunning
			createWithStatus(rt, w.f.c, &p)
			w.forged[p.UID] = true
			w.v.note("pod %s labeled, never admitted", name)
		},
		"A3 a user writes a Lease of a slot's name without the lease label": func(rt *rapid.T) {
			if w.foreign != nil {
				rt.Skip("written already")
			}
			name := fencingv1.SlotLeaseName(key.Name, 2)
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("someone")}}
			switch err := w.f.c.Create(context.Background(), l); {
			case apierrors.IsAlreadyExists(err):
				rt.Skip("slot 2's Lease exists")
			case err != nil:
				rt.Fatalf("%v", err)
			}
			w.foreign = l
			w.v.note("a user created Lease %s without the lease label", name)
		},
	}
}

// oneOf runs one of actions, drawn: a group of actions weighs as one in rapid's draw, so
// the operator's pass and the clock come up often enough to act on what they change.
func oneOf(rt *rapid.T, actions map[string]func(*rapid.T)) {
	actions[rapid.SampledFrom(slices.Sorted(maps.Keys(actions))).Draw(rt, "which")](rt)
}

// settle runs the operator with every holder renewing until nothing is left to finish:
// what a history left half-done is finished.
func (w *historyWorld) settle(rt *rapid.T) {
	w.f.r.Client = w.f.r.Client.(*afterLeaseRead) // no crash from here
	clear(w.paused)
	for range 12 {
		w.renewAll(rt)
		w.reconcile(rt)
		w.v.check(rt, w.f.c)
		w.f.clock.Step(500 * time.Millisecond)
	}
}

// TestGeneratedHistories runs generated histories of the protocol against the real
// controller and checks the invariants after every action; at the end of each, once
// settled, every token spent was carried by a grant (status.fencingToken at most
// status.transitions while minFencingToken was never raised). In make test fifty
// histories, new ones each run (rapid draws its seed); make chaos runs ten thousand
// (-rapid.checks=10000).
func TestGeneratedHistories(t *testing.T) {
	oneExplorationAtATime(t)
	var histories, finalized int
	reached := map[string]int{}
	defer func() {
		t.Logf("histories: %d, of which %d saw their FencedLease deleted and let go", histories, finalized)
		for _, outcome := range slices.Sorted(maps.Keys(reached)) {
			t.Logf("  %s: in %d", outcome, reached[outcome])
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		histories++
		fl := newFL(10)
		fl.Finalizers = []string{fencingv1.Finalizer}
		fl.Spec.Holders = int32(rapid.IntRange(1, 3).Draw(rt, "holders"))
		if rapid.Bool().Draw(rt, "ordinal") {
			fl.Spec.SlotAssignment = fencingv1.SlotAssignmentOrdinal
		}
		if rapid.Bool().Draw(rt, "keep pods") {
			fl.Spec.RevocationPolicy = fencingv1.KeepPodPolicy
		}
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: workload, UID: workloadUID},
			Status: appsv1.StatefulSetStatus{UpdateRevision: "r1"}}
		w := &historyWorld{f: fixtureOf(fl, sts), v: newInvariants(), paused: map[types.UID]bool{}, born: map[string]int{},
			revision: "r1", forged: map[types.UID]bool{}, saw: map[string]bool{}}
		for _, name := range podNames[:rapid.IntRange(1, 3).Draw(rt, "pods")] {
			w.create(rt, name, rapid.Bool().Draw(rt, "warm"), true)
		}
		rt.Repeat(w.actions())
		w.settle(rt)
		for outcome := range w.saw {
			reached[outcome]++
		}
		if apierrors.IsNotFound(w.f.c.Get(context.Background(), key, &fencingv1.FencedLease{})) {
			finalized++
		}
		got := &fencingv1.FencedLease{}
		// A slot keeps no record of a release but its pod's mark: with the pod gone and the
		// operator killed between the status write and the Lease's, the grant is counted
		// again (transitions only; docs/protocol.md). A token no grant carries is a defect.
		if err := w.f.c.Get(context.Background(), key, got); err == nil && !w.minRaised && got.Status.FencingToken > got.Status.Transitions {
			rt.Fatalf("fencingToken %d, transitions %d: a token spent that no grant carries\nhistory:\n  %s\nobjects:\n  %s",
				got.Status.FencingToken, got.Status.Transitions, joinLines(w.v.history), joinLines(dump(w.f.c)))
		}
	})
}
