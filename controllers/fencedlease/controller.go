package fencedlease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/leadership"
	"github.com/fencedlease/fencedlease/internal/eventnote"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// +kubebuilder:rbac:groups=fencing.fencedlease.io,resources=fencedleases,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fencing.fencedlease.io,resources=fencedleases/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fencing.fencedlease.io,resources=fencedleases/finalizers,verbs=update
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=replicasets;statefulsets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile observes, decides the next status, writes it once, then makes the Lease and
// the pods follow it. A write that lost an optimistic-concurrency race, hit an object
// the cache did not yet know was gone, or created one that already existed, is retried
// from a fresh observation; that is routine, not an error to report.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// No request may hang: a reconcile stuck on a dead connection holds its FencedLease.
	ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
	defer cancel()
	res, err := r.reconcile(ctx, req)
	r.recovery.observe(err)
	if r.staleRetries != nil && !staleRead(err) {
		r.staleRetries.Forget(req)
	}
	switch {
	case staleRead(err):
		retry := conflictRetry
		if r.staleRetries != nil {
			retry = r.staleRetries.When(req)
		}
		logf.FromContext(ctx).V(1).Info("stale read, retrying", "error", err.Error(), "after", retry)
		return ctrl.Result{RequeueAfter: retry}, nil
	case errors.Is(err, leadership.ErrNotLeader) || errors.Is(err, leadership.ErrTermEnded):
		// Not certainly the leader: decide nothing. Leadership comes back with the next
		// confirmed renewal, or the process ends and a standby takes over.
		logf.FromContext(ctx).Info("leadership not certain; not acting")
		return ctrl.Result{RequeueAfter: notLeaderRetry}, nil
	}
	return res, err
}

// staleRead: a write lost an optimistic-concurrency race, hit an object the cache did not
// yet know was gone, or created one that already existed.
func staleRead(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err)
}

const (
	// conflictRetry is the first retry after a stale read: short, the newer object is
	// usually already on its way to the cache (staleretry.go backs off from there).
	conflictRetry = 20 * time.Millisecond
	// cacheBehind is a fallback only: a reconcile that found the cache behind one of its
	// own writes comes back with the watch event that write brings (the FencedLease
	// predicate lets that one through too), not by polling, which under load would burn
	// the CPU the API server needs.
	cacheBehind = time.Second
	// notLeaderRetry: a leader that missed a renewal usually confirms the next one soon.
	notLeaderRetry = time.Second
	// reconcileTimeout bounds one reconcile's requests together.
	reconcileTimeout = 10 * time.Second
	// maxRetryDelay caps the workqueue's back-off after errors: after an API-server
	// outage every failed FencedLease is tried again within this, not minutes later.
	maxRetryDelay = time.Second
)

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fl := &fencingv1.FencedLease{}
	if err := r.Get(ctx, req.NamespacedName, fl); err != nil {
		if apierrors.IsNotFound(err) {
			r.tracker.forget(req.NamespacedName)
			r.uncached.found(req.NamespacedName, false)
			r.Metrics.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if r.ownWrites.landed(fl.UID, fl.ResourceVersion) {
		return ctrl.Result{RequeueAfter: cacheBehind}, nil
	}
	if fl.DeletionTimestamp == nil && controllerutil.AddFinalizer(fl, fencingv1.Finalizer) {
		from := fl.ResourceVersion
		err := r.Update(ctx, fl)
		r.ownWrites.after(fl, from, err)
		if err != nil {
			return ctrl.Result{}, err
		}
	}
	if fl.DeletionTimestamp != nil && !controllerutil.ContainsFinalizer(fl, fencingv1.Finalizer) {
		return ctrl.Result{}, nil
	}

	w, err := r.observe(ctx, fl, false)
	if err != nil {
		return ctrl.Result{}, err
	}
	if r.ownWrites.behind(w) {
		// Deciding on a view older than this controller's own last write would only send
		// writes bound to fail on their resourceVersion.
		return ctrl.Result{RequeueAfter: cacheBehind}, nil
	}
	d := decide(w)
	if w.leaseUnread && !d.createsLease() {
		// The cache shows no Lease, and it holds labeled Leases only: ask the API server
		// (a Lease someone else created, a tombstone the watch has not brought yet), and
		// decide again. A grant whose first write is the Lease's creation needs no read:
		// the creation fails, spending nothing, if any Lease of that name exists (G2).
		if w, err = r.observe(ctx, fl, true); err != nil {
			return ctrl.Result{}, err
		}
		d = decide(w)
	}
	keeps := settled(fl, d)
	if !keeps {
		// Its renewals queue passes again, as any event does (renewals.go).
		r.tracker.unsettle(req.NamespacedName)
	}
	ours := !d.foreignLease
	handsOver := false
	if d.leaseFirst() && ours {
		handsOver = d.handsOver(w)
		if w.lease, err = r.revokeOnLease(ctx, fl, d, w.lease); err != nil {
			return ctrl.Result{}, fmt.Errorf("revoking on the Lease: %w", err)
		}
		r.executedOnLease(fl, d, handsOver)
	}
	if d.statusWait > 0 {
		// The Lease holds the grant: the pods follow it now, and the status records it
		// with the first renewal, or when the wait is over (deferStatus).
		fl.Status = d.status
	} else if err := r.writeStatus(ctx, fl, d); err != nil {
		return ctrl.Result{}, err
	}
	if ours {
		if err := r.syncLease(ctx, fl, w.lease, w.renewal); err != nil {
			return ctrl.Result{}, fmt.Errorf("writing Lease: %w", err)
		}
		if h := d.granted(); h != nil && d.grantOnLease && d.statusWait > 0 {
			r.tracker.grantedOnLease(req.NamespacedName, h.PodUID, h.Token, d.now) // G2 landed; the status follows (G4)
		}
	}
	pods := append(w.pods, w.unlabeled...)
	if (handsOver || d.grantOnLease) && d.statusWait > 0 {
		// The Lease is the new grant's first record (X3 with G2, or G2): a Warm holder
		// starts on it. A Cold one starts only once its pod is patched (G3): that, and the
		// demotions before it, come now; the rest — a Warm holder's pods, a revoked pod's
		// deletion — follows in a pass of its own, behind every other Lease that must move
		// now (P1). It adopts the grant off the Lease, as a pass after a crash here would.
		// The echo of this pass's last write brings it back; the requeue is a fallback.
		if !startsOnLease(w, d.granted()) {
			if err := r.syncPods(ctx, fl, pods, false); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{RequeueAfter: cacheBehind, Priority: ptr.To(followUpPriority)}, nil
	}
	if err := r.syncPods(ctx, fl, pods, true); err != nil {
		return ctrl.Result{}, err
	}
	if fl.DeletionTimestamp != nil && (d.grant != nil || d.status.Holder != nil) {
		// A grant only the Lease recorded (G2, or a hand-over) was adopted just now, or a
		// holder still stands: its pod may be at work, so revoke it (D1) before letting go.
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	if fl.DeletionTimestamp != nil {
		// The holder is revoked and the Lease keeps the high-water token: let it go.
		controllerutil.RemoveFinalizer(fl, fencingv1.Finalizer)
		return ctrl.Result{}, r.Update(ctx, fl)
	}
	if d.statusWait > 0 {
		// Only the status write is left, and it waits (G4, X4): follow-up work.
		return ctrl.Result{RequeueAfter: d.requeueAfter, Priority: ptr.To(followUpPriority)}, nil
	}
	if h := d.status.Holder; keeps {
		r.tracker.settle(req.NamespacedName, h.PodUID, h.Token)
	}
	return ctrl.Result{RequeueAfter: d.requeueAfter, Priority: ptr.To(normalPriority)}, nil
}

// settled is true when the pass keeps the grant with nothing of it left waiting for a
// renewal: the status records its first renewal, no hand-off was asked, no revocation is
// requested, the FencedLease is not being deleted; so only its expiry is due, on the timer
// this pass sets (keepRule), and its renewals need queue no pass (renewals.go).
func settled(fl *fencingv1.FencedLease, d decision) bool {
	h := d.status.Holder
	return h != nil && d.end != nil && d.end.kind == keep && d.grant == nil && d.statusWait == 0 && d.requeueAfter > 0 &&
		h.FirstRenewTime != nil && h.Handoff == nil && fl.DeletionTimestamp == nil && !revokeRequested(fl, h)
}

// executedOnLease follows a Lease cleared (or handed over) before the status write (X3,
// C1): a revocation is remembered with its reason, and when the hand-over happened, until
// the status records it, and a cut-off on request or for a pod that cannot run is told to
// the user now, while the grant still runs out.
func (r *Reconciler) executedOnLease(fl *fencingv1.FencedLease, d decision, handedOver bool) {
	h, key := fl.Status.Holder, client.ObjectKeyFromObject(fl)
	switch t := d.end; {
	case t.kind == revoke:
		p := pendingRevocation{reason: t.revocation, message: t.message, lateness: t.lateness, at: d.now}
		if handedOver {
			p.handedOverAt = d.now
		}
		r.tracker.revokingOnLease(key, h.PodUID, h.Token, p)
	case d.revokeRequested():
		r.event(fl, podRef(fl.Namespace, h.PodName, h.PodUID), true, corev1.EventTypeWarning, "RevokeRequested", "Revoke",
			fmt.Sprintf("revoking token %d of pod %s as requested (%s): its renewals are refused from now on, and the next pod is granted once its lease has run out, in at most %v",
				h.Token, h.PodName, fencingv1.RevokeAnnotation, d.requeueAfter.Round(time.Millisecond)))
	case t.kind == cutOff && t.revocation == fencingv1.ReasonPodCannotRun:
		r.event(fl, podRef(fl.Namespace, h.PodName, h.PodUID), true, corev1.EventTypeWarning, string(fencingv1.ReasonPodCannotRun), "Revoke",
			fmt.Sprintf("revoking token %d of pod %s: %s; its renewals are refused from now on, and the next pod is granted once its lease has run out, in at most %v",
				h.Token, h.PodName, t.message, d.requeueAfter.Round(time.Millisecond)))
	}
}

// observe reads the clock, then the Lease and the labeled pods, confirms the holder pod
// by UID, and asks the tracker when the holder was last seen renewing. The clock comes
// first: a renewal that lands after that reading is either in the Lease read here, or
// makes the revocation's compare-and-swap on the Lease fail. So is one the cache has not
// shown yet: the compare-and-swap carries the version read, so the cache may lag without
// a holder ever being revoked for a renewal that landed.
func (r *Reconciler) observe(ctx context.Context, fl *fencingv1.FencedLease, uncached bool) (world, error) {
	w := world{fl: fl, now: r.Clock.Now()}
	var err error
	// A grant's Lease is read from the API server when the cache misses it: the tracker
	// takes its first look at a grant with the Lease it read, as a second look with the
	// Lease's renewTime would count as a renewal.
	uncached = uncached || fl.Status.Holder != nil
	if w.lease, w.leaseUnread, err = r.readLease(ctx, client.ObjectKeyFromObject(fl), uncached); err != nil {
		return w, err
	}
	if w.pods, err = r.pods.forLease(fl.Namespace, fl.Name); err != nil {
		return w, err
	}
	w.unfitNodes = r.unfitNodes(w.pods)
	rec := leaserecord.Read(w.lease)
	if h := fl.Status.Holder; h != nil {
		key := client.ObjectKeyFromObject(fl)
		w.renewal = r.tracker.observe(key, h.PodUID, h.Token, renewalOn(rec, h))
		// Not among the labeled pods: gone, or still there without its label. Unless this
		// process handed its grant over already and made its pod follow (X5, X6): then
		// the status only waits for the next holder's first renewal (deferStatus), and
		// asking again at every reconcile of that wait would be a read per event for a pod
		// that is gone.
		if w.holder = findPod(w.pods, h.PodUID); w.holder == nil && w.renewal.revoking.handedOverAt.IsZero() {
			holder, err := r.podByUID(ctx, fl.Namespace, h.PodName, h.PodUID)
			if err != nil {
				return w, err
			}
			if holder != nil {
				w.holder = holder
				w.unlabeled = append(w.unlabeled, *holder)
			}
		}
		if h.Handoff != nil {
			w.handoffSince = r.tracker.handoffStarted(key, h.PodUID, h.Token)
		} else if fl.DeletionTimestamp == nil {
			if w.successor, err = r.successorOf(ctx, key, h, w.holder, grantorder.Candidates(w.pods, &fl.Status, "")); err != nil {
				return w, err
			}
		}
	}
	if rec.Ahead(fl.Status.FencingToken) {
		w.grantedOnLeaseAt = r.tracker.grantedOnLeaseAt(client.ObjectKeyFromObject(fl), rec.HolderUID, rec.Token)
	}
	if rv := fl.Status.LastRevocation; rv != nil && rv.DelaySeconds > 0 {
		// A lock-delay this process did not begin (it took over since) counts from now.
		w.delaySince = r.tracker.delayStarted(client.ObjectKeyFromObject(fl), rv.PodUID, rv.Token, w.now)
	}
	if rv := fl.Status.LastRevocation; rv != nil && rv.Reason == fencingv1.ReasonLabelRemoved && findPod(w.pods, rv.PodUID) == nil {
		// Finish marking (and deleting) a pod revoked for losing its label: one uncached
		// read a reconcile, until the next revocation.
		p, err := r.podByUID(ctx, fl.Namespace, rv.PodName, rv.PodUID)
		if err != nil {
			return w, err
		}
		if p != nil {
			w.unlabeled = append(w.unlabeled, *p)
		}
	}
	return w, nil
}

// unfitNodes says which of the nodes the Warm pods among pods run on cannot take a grant
// now, and why.
func (r *Reconciler) unfitNodes(pods []corev1.Pod) map[string]string {
	var out map[string]string
	for i := range pods {
		node := pods[i].Spec.NodeName
		if r.nodes == nil || node == "" || !grantorder.Warm(&pods[i]) {
			continue
		}
		if why := r.nodes.unfit(node); why != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[node] = why
		}
	}
	return out
}

// successorOf is the first candidate of a newer revision of grant h's workload (see
// newerRevision), or nil. The answer is remembered for the candidates it was given, so a
// rollout that waits costs its reads once, not at every renewal, and it outlives the
// holder pod: a Warm holder is usually deleted by its own controller before the grant
// moves on, and the next grant still goes to the newest revision.
func (r *Reconciler) successorOf(ctx context.Context, key client.ObjectKey, h *fencingv1.Holder, pod *corev1.Pod, cands []*corev1.Pod) (*corev1.Pod, error) {
	if len(cands) == 0 {
		return nil, nil
	}
	ids := make([]string, len(cands))
	for i, c := range cands {
		ids[i] = string(c.UID)
	}
	asked := strings.Join(ids, ",")
	if a, ok := r.tracker.newerRevision(key, h.PodUID, h.Token); ok && (a.candidates == asked || pod == nil) {
		return findCandidate(cands, a.successor), nil
	}
	if pod == nil {
		return nil, nil
	}
	next, err := r.newerRevision(ctx, pod, cands)
	if err != nil {
		return nil, err
	}
	a := newerRevisionAnswer{candidates: asked}
	if next != nil {
		a.successor = next.UID
	}
	r.tracker.rememberNewerRevision(key, h.PodUID, h.Token, a)
	return next, nil
}

// renewalOn is the renewTime the holder of grant h wrote on the Lease; nil while the Lease
// does not show the grant, or shows only the controller's own grant-time write (its
// renewTime is the acquireTime): that is not a renewal.
func renewalOn(rec leaserecord.Record, h *fencingv1.Holder) *metav1.MicroTime {
	if rec.Shows(h.PodName, h.PodUID, h.Token) && rec.Renewed() {
		return rec.RenewTime
	}
	return nil
}

// readLease reads the Lease from the cache, which holds the operator's (labeled) Leases
// and follows every renewal without a request. Only a Lease the cache does not show —
// none yet, one the cache has not caught up with, or a foreign one without the label —
// costs a read. nil when there is none.
func (r *Reconciler) readLease(ctx context.Context, key client.ObjectKey, uncached bool) (_ *coordinationv1.Lease, unread bool, _ error) {
	lease := &coordinationv1.Lease{}
	err := r.Get(ctx, key, lease)
	if apierrors.IsNotFound(err) {
		if !uncached && !r.uncached.has(key) {
			return nil, true, nil // not in the cache; the API server not asked (yet)
		}
		err = r.APIReader.Get(ctx, key, lease)
		r.uncached.found(key, err == nil)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return lease, false, nil
}

// podByUID reads pod (name, uid) uncached, for a pod the label-filtered cache does not
// show: so a pod that lost its label is never mistaken for one that is gone. It returns
// nil when the pod is gone (a pod of the same name with another UID is another pod).
func (r *Reconciler) podByUID(ctx context.Context, ns, name string, uid types.UID) (*corev1.Pod, error) {
	return readByUID(ctx, r.APIReader, &corev1.Pod{}, ns, name, uid)
}

// readByUID reads object (name, uid) into obj uncached; nil when it is gone or another
// object now has its name.
func readByUID[T client.Object](ctx context.Context, reader client.Reader, obj T, ns, name string, uid types.UID) (T, error) {
	var none T
	switch err := reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj); {
	case apierrors.IsNotFound(err):
		return none, nil
	case err != nil:
		return none, fmt.Errorf("reading %T %s: %w", obj, name, err)
	case obj.GetUID() != uid:
		return none, nil
	}
	return obj, nil
}

// revokeOnLease ends the status's grant on the Lease with a compare-and-swap on the
// version read, before the status records anything (X3, C1), so a renewal that landed
// since wins and the decision is made again. When the decision grants the next pod too,
// the same write names it (X3 with G2: the hand-over): its token is the status's next,
// and the Lease is its first record — a status write that fails after it is finished by
// the next reconcile, which adopts the grant off the Lease (adoptRule).
func (r *Reconciler) revokeOnLease(ctx context.Context, fl *fencingv1.FencedLease, d decision, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if !d.leaseShowsHolder {
		return lease, nil // the grant never reached the Lease: nobody could renew it
	}
	next := lease.DeepCopy()
	if d.grant != nil {
		next = leaseShowing(fl, &d.status, lease, renewal{})
	} else {
		var reason fencingv1.RevocationReason
		switch t := d.end; {
		case t != nil && t.kind == cutOff && t.revocation == fencingv1.ReasonPodCannotRun:
			// Only the Lease can say why this holder stands cut off (see waitingOutCutOff).
			reason = t.revocation
		case t != nil && t.kind == revoke:
			// Revoked here and now (X3): a restart before the status records it (X4) still
			// finishes it for this reason (finishRevocationRule).
			reason = t.revocation
		}
		leaserecord.CutOff(next, reason)
	}
	err := r.Update(ctx, next)
	r.ownWrites.after(next, lease.ResourceVersion, err)
	if err != nil {
		return nil, err
	}
	return next, nil
}

// writeStatus writes the decided status with the resourceVersion that was read: a
// token is spent only if nobody else wrote in between. Events and metrics follow a
// successful write only.
func (r *Reconciler) writeStatus(ctx context.Context, fl *fencingv1.FencedLease, d decision) error {
	if equality.Semantic.DeepEqual(fl.Status, d.status) {
		return nil
	}
	fl.Status = d.status
	from := fl.ResourceVersion
	err := r.Status().Update(ctx, fl)
	r.ownWrites.after(fl, from, err)
	if err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	r.statusWritten(fl, d)
	r.record(ctx, fl, d)
	return nil
}

// statusWritten starts this process's clocks for what the status now records: a new
// grant's first look (its startup deadline counts from here) and a hand-off request's
// grace period.
func (r *Reconciler) statusWritten(fl *fencingv1.FencedLease, d decision) {
	key := client.ObjectKeyFromObject(fl)
	if h := d.granted(); h != nil {
		r.tracker.observe(key, h.PodUID, h.Token, nil)
	}
	if h := d.status.Holder; h != nil && d.asked() {
		r.tracker.handoffAsked(key, h.PodUID, h.Token, d.now)
	}
	if h := d.status.Holder; h != nil && d.ended(withdrawHandoff) != nil {
		r.tracker.handoffWithdrawn(key, h.PodUID, h.Token) // a later request gets its whole grace period
	}
	if rv := d.revoked(); rv != nil && rv.DelaySeconds > 0 {
		at := d.now
		if !d.end.at.IsZero() {
			at = d.end.at
		}
		r.tracker.delayStarted(key, rv.PodUID, rv.Token, at) // X8 counts from the revocation
	}
}

// record tells users (events) and dashboards (metrics) what a status write changed. A
// transition — a grant that ends and the next that begins in one write — is one event on
// the FencedLease (the end's reason and type, both halves in its note) and one on the new
// holder's pod; the ended grant's pod shows state Revoked or Released, and is usually
// deleted, so an event there would be one more write in the failover for nobody.
func (r *Reconciler) record(ctx context.Context, fl *fencingv1.FencedLease, d decision) {
	log := logf.FromContext(ctx)
	key := client.ObjectKeyFromObject(fl)
	next := d.granted()
	// ended tells the end of a grant: with the next grant in its note when there is one.
	ended := func(pod *corev1.Pod, kind, reason, action, note string) {
		if next != nil {
			note = eventnote.Transition(note, next.Token, next.PodName)
		}
		r.event(fl, pod, next == nil, kind, reason, action, note)
	}
	if t, rv := d.end, d.revoked(); rv != nil {
		pod := podRef(fl.Namespace, rv.PodName, rv.PodUID)
		log.Info("revoked", "pod", klog.KObj(pod), "token", rv.Token, "reason", rv.Reason, "rule", t.rule, "late", t.lateness)
		detail := string(rv.Reason)
		if rv.Message != "" {
			detail += " (" + rv.Message + ")"
		}
		ended(pod, corev1.EventTypeWarning, "Revoked", "Revoke", eventnote.Revoked(rv.Token, rv.PodName, detail))
		r.Metrics.revoked(rv.Reason, t.lateness)
	}
	if t := d.ended(withdrawHandoff); t != nil {
		log.Info("hand-off withdrawn: the successor no longer waits", "pod", klog.KRef(fl.Namespace, t.holder.PodName), "token", t.holder.Token)
	}
	if t := d.released(); t != nil {
		h := t.holder
		pod := podRef(fl.Namespace, h.PodName, h.PodUID)
		log.Info("released", "pod", klog.KObj(pod), "token", h.Token, "reason", t.release)
		ended(pod, corev1.EventTypeNormal, "Released", "Release", eventnote.Released(h.Token, h.PodName, string(t.release)))
		r.Metrics.released(t.release)
	}
	if next != nil {
		pod := podRef(fl.Namespace, next.PodName, next.PodUID)
		log.Info("granted", "pod", klog.KObj(pod), "token", next.Token)
		note := eventnote.Granted(next.Token, next.PodName)
		if d.revoked() != nil || d.released() != nil {
			r.eventOnPod(fl, pod, corev1.EventTypeNormal, "Granted", "Grant", note) // told on the FencedLease with the end
		} else {
			r.event(fl, pod, true, corev1.EventTypeNormal, "Granted", "Grant", note)
		}
		if t := d.grant; !t.podCreated.IsZero() {
			r.Metrics.granted(next.AcquireTime.Sub(t.podCreated)) // the grant's time: its status write may have waited
		}
	}
	r.Metrics.setStatus(key, d.status)
}

// event records an event on the FencedLease naming the pod, and — onPod — the same event
// on the pod naming the FencedLease.
func (r *Reconciler) event(fl *fencingv1.FencedLease, pod *corev1.Pod, onPod bool, kind, reason, action, note string) {
	if r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(fl, pod, kind, reason, action, "%s", note)
	if onPod {
		r.eventOnPod(fl, pod, kind, reason, action, note)
	}
}

// eventOnPod records an event on the pod alone, naming the FencedLease.
func (r *Reconciler) eventOnPod(fl *fencingv1.FencedLease, pod *corev1.Pod, kind, reason, action, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(pod, fl, kind, reason, action, "%s", note)
	}
}

func podRef(ns, name string, uid types.UID) *corev1.Pod {
	p := &corev1.Pod{}
	p.Namespace, p.Name, p.UID = ns, name, uid
	p.APIVersion, p.Kind = "v1", "Pod"
	return p
}

// notStatusOnly lets every event through but an update that changed only the status —
// which only this controller writes (the fencedlease-status admission policy) — unless a
// reconcile waits for it: one that found the cache behind this very write.
func (r *Reconciler) notStatusOnly() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetGeneration() != n.GetGeneration() ||
			!equality.Semantic.DeepEqual(o.GetDeletionTimestamp(), n.GetDeletionTimestamp()) ||
			!equality.Semantic.DeepEqual(o.GetFinalizers(), n.GetFinalizers()) ||
			!equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) ||
			!equality.Semantic.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) ||
			r.ownWrites.landed(o.GetUID(), o.GetResourceVersion())
	}}
}

// byLabel maps a labeled Lease or pod to the FencedLease its label names.
func byLabel(_ context.Context, o client.Object) []reconcile.Request {
	name, ok := o.GetLabels()[fencingv1.LeaseLabel]
	if !ok || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}
