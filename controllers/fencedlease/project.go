package fencedlease

import (
	"context"
	"fmt"
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/internal/grantorder"
)

// syncLease makes the Lease show the status: the holder (G2) or no holder, and
// always the high-water token, so the Lease outlives the FencedLease as its tombstone.
// Writes carry the resourceVersion that was read.
func (r *Reconciler) syncLease(ctx context.Context, fl *fencingv1.FencedLease, s decision.SlotFrame, lease *coordinationv1.Lease, last decision.Renewal) error {
	key := s.LeaseKey(fl)
	if lease == nil {
		// A slot's Lease is made by its first grant: an unused slot needs no tombstone.
		if fl.Status.Holder == nil && (fl.Status.FencingToken == 0 || s.Sharded) {
			return nil
		}
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	}
	want := decision.LeaseShowing(fl, s, &fl.Status, lease, last)
	if lease.ResourceVersion == "" {
		err := r.Create(ctx, want)
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil // the namespace and its tokens end together; nothing can be created there
		}
		if apierrors.IsAlreadyExists(err) {
			// One the cache does not show: read it from the API server from now on.
			r.uncached.found(key, true)
		}
		if err == nil {
			r.ownWrites.createdLease(s.LeaseOwner(fl), want)
		}
		return err
	}
	if equality.Semantic.DeepEqual(lease, want) {
		return nil
	}
	err := r.Update(ctx, want)
	r.ownWrites.after(want, lease.ResourceVersion, err)
	return err
}

// DemotePods finishes the end of a grant on every pod of pods that no longer holds one
// (demote): first, so no two pods are ever marked Holding, or labeled holder, at once.
func (r *Reconciler) demotePods(ctx context.Context, fl *fencingv1.FencedLease, pods []corev1.Pod) error {
	for i := range pods {
		if p := &pods[i]; !namesHolder(fl, p) {
			if err := r.demotePod(ctx, fl, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// PromoteHolder gives the holder's pod, when it is among pods and not terminating, its
// token, state Holding (or Draining), the holder label, and lifts the scheduling gate so
// it can start (G3), in one write.
func (r *Reconciler) promoteHolder(ctx context.Context, fl *fencingv1.FencedLease, s decision.SlotFrame, pods []corev1.Pod) error {
	h := fl.Status.Holder
	for i := range pods {
		if p := &pods[i]; namesHolder(fl, p) && p.DeletionTimestamp == nil && !showsGrant(p, h, s) {
			return r.patchPod(ctx, p, func(p *corev1.Pod) {
				setAnnotation(p, fencingv1.TokenAnnotation, decision.FormatToken(h.Token))
				setAnnotation(p, fencingv1.StateAnnotation, string(holdingState(h)))
				setLabel(p, fencingv1.HolderLabel, "true")
				if s.Sharded {
					setAnnotation(p, fencingv1.SlotAnnotation, strconv.Itoa(int(s.Index)))
					setLabel(p, fencingv1.SlotLabel, strconv.Itoa(int(s.Index)))
				} else {
					delete(p.Labels, fencingv1.SlotLabel) // a FencedLease that had slots
				}
				p.Spec.SchedulingGates = decision.WithoutGate(p.Spec.SchedulingGates)
			})
		}
	}
	return nil
}

// showsGrant: pod p shows grant h of slot s as promoteHolder writes it, so there is
// nothing to write. Most passes find it so, and it spares them a copy of the pod.
func showsGrant(p *corev1.Pod, h *fencingv1.Holder, s decision.SlotFrame) bool {
	a, l := p.Annotations, p.Labels
	slot, slotLabeled := l[fencingv1.SlotLabel]
	if s.Sharded {
		want := strconv.Itoa(int(s.Index))
		if a[fencingv1.SlotAnnotation] != want || slot != want {
			return false
		}
	} else if slotLabeled {
		return false
	}
	return a[fencingv1.TokenAnnotation] == decision.FormatToken(h.Token) && a[fencingv1.StateAnnotation] == string(holdingState(h)) &&
		l[fencingv1.HolderLabel] == "true" && len(decision.WithoutGate(p.Spec.SchedulingGates)) == len(p.Spec.SchedulingGates)
}

// deleteRevokedPods deletes the revoked pods of pods that must go (X6): after the
// holder's write, which a Cold holder waits for to start.
func (r *Reconciler) deleteRevokedPods(ctx context.Context, fl *fencingv1.FencedLease, pods []corev1.Pod) error {
	for i := range pods {
		if p := &pods[i]; !namesHolder(fl, p) {
			if err := r.deleteRevoked(ctx, fl, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// namesHolder: p is the pod fl's status names holder.
func namesHolder(fl *fencingv1.FencedLease, p *corev1.Pod) bool {
	return fl.Status.Holder != nil && p.UID == fl.Status.Holder.PodUID
}

// demotePod finishes the end of a grant on a pod that no longer holds one: the last revoked
// pod is marked Revoked whatever it showed (its grant may have ended before G3), any
// other pod still marked Holding (or Draining) is marked Released; either loses the
// holder label in the same write.
func (r *Reconciler) demotePod(ctx context.Context, fl *fencingv1.FencedLease, p *corev1.Pod) error {
	next := grantorder.PodState(p)
	if rv := fl.Status.LastRevocation; rv != nil && rv.PodUID == p.UID {
		next = fencingv1.PodRevoked
	} else if next == fencingv1.PodHolding || next == fencingv1.PodDraining {
		next = fencingv1.PodReleased
	}
	_, labeled := p.Labels[fencingv1.HolderLabel]
	_, slotLabeled := p.Labels[fencingv1.SlotLabel]
	if next != grantorder.PodState(p) || labeled || slotLabeled {
		return r.patchPod(ctx, p, func(p *corev1.Pod) {
			setAnnotation(p, fencingv1.StateAnnotation, string(next))
			delete(p.Labels, fencingv1.HolderLabel)
			delete(p.Labels, fencingv1.SlotLabel)
		})
	}
	return nil
}

// DeleteRevoked deletes a pod marked Revoked that must go (mustDelete), by UID.
func (r *Reconciler) deleteRevoked(ctx context.Context, fl *fencingv1.FencedLease, p *corev1.Pod) error {
	if grantorder.PodState(p) != fencingv1.PodRevoked || p.DeletionTimestamp != nil || !mustDelete(fl, p) {
		return nil
	}
	err := r.Delete(ctx, p, client.Preconditions{UID: &p.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting revoked pod %s: %w", p.Name, err)
	}
	r.ownWrites.wrote(p.UID, p.ResourceVersion)
	return nil
}

// holdingState is the state the holder pod shows: Draining once asked to hand off.
func holdingState(h *fencingv1.Holder) fencingv1.PodState {
	if h.Handoff != nil {
		return fencingv1.PodDraining
	}
	return fencingv1.PodHolding
}

// mustDelete is true for a revoked pod under DeletePod, and for one revoked before it ever
// renewed whatever the policy (StartupDeadlineExceeded, PodCannotStart): it never ran,
// and kept it could still be scheduled and start with a dead token.
func mustDelete(fl *fencingv1.FencedLease, p *corev1.Pod) bool {
	if rv := fl.Status.LastRevocation; rv != nil && rv.PodUID == p.UID &&
		(rv.Reason == fencingv1.ReasonStartupDeadlineExceeded || rv.Reason == fencingv1.ReasonPodCannotStart) {
		return true
	}
	return fl.Spec.RevocationPolicy != fencingv1.KeepPodPolicy
}

// patchPod applies mutate with an optimistic lock, and skips the write when it changes
// nothing. p is updated to what the server returned; the maps it had are never written,
// as they are the pass's view of the pod, which other slots read meanwhile.
func (r *Reconciler) patchPod(ctx context.Context, p *corev1.Pod, mutate func(*corev1.Pod)) error {
	next := p.DeepCopy()
	mutate(next)
	if equality.Semantic.DeepEqual(p, next) {
		return nil
	}
	err := r.Patch(ctx, next, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{}))
	r.ownWrites.after(next, p.ResourceVersion, err)
	if err != nil {
		return fmt.Errorf("updating pod %s: %w", p.Name, err)
	}
	*p = *next
	return nil
}

func setAnnotation(p *corev1.Pod, k, v string) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[k] = v
}

func setLabel(p *corev1.Pod, k, v string) {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[k] = v
}
