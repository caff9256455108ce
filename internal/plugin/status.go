package plugin

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/grantorder"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// Status is what `status` shows; -o json|yaml prints it as is.
type Status struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	Ready        string `json:"ready"`
	ReadyReason  string `json:"readyReason,omitempty"`
	Message      string `json:"message,omitempty"`
	Suspended    bool   `json:"suspended"`
	FencingToken int64  `json:"fencingToken"`
	Transitions  int64  `json:"transitions"`
	Revocations  int64  `json:"revocations"`
	// Holder is nil when nobody holds the grant.
	Holder         *HolderStatus         `json:"holder,omitempty"`
	LastRevocation *fencingv1.Revocation `json:"lastRevocation,omitempty"`
	Waiting        []WaitingPod          `json:"waiting"`
	RevokeToken    string                `json:"revokeRequestedForToken,omitempty"`
	Handoff        *fencingv1.Handoff    `json:"handoff,omitempty"`
	Conditions     []ConditionSummary    `json:"conditions,omitempty"`
	// Holding and Slots, for a FencedLease with slots (spec.holders above 1): "held/holders"
	// and each slot; Holder, Handoff and LastRevocation above are then unset.
	Holding string       `json:"holding,omitempty"`
	Slots   []SlotStatus `json:"slots,omitempty"`
	now     time.Time
}

// SlotStatus is one slot of a FencedLease with slots.
type SlotStatus struct {
	Slot           int32                 `json:"slot"`
	Holder         *HolderStatus         `json:"holder,omitempty"`
	Handoff        *fencingv1.Handoff    `json:"handoff,omitempty"`
	LastRevocation *fencingv1.Revocation `json:"lastRevocation,omitempty"`
}

// HolderStatus is the current grant, with times read against this machine's clock.
type HolderStatus struct {
	Pod           string          `json:"pod"`
	Token         int64           `json:"token"`
	AcquireTime   time.Time       `json:"acquireTime"`
	LeaseDuration metav1.Duration `json:"leaseDuration"`
	// LastRenewTime is the Lease's renewTime: written by the holder, on its clock.
	LastRenewTime *time.Time `json:"lastRenewTime,omitempty"`
	// SinceRenewal and TimeLeft compare that with this machine's clock: an estimate. The
	// operator judges expiry on its own clock, from when it saw the renewal.
	SinceRenewal *metav1.Duration `json:"sinceRenewal,omitempty"`
	TimeLeft     *metav1.Duration `json:"timeLeft,omitempty"`
	// Confirmed: the holder renewed at least once since the grant (its workload runs).
	Confirmed bool `json:"confirmed"`
	// LeaseHeld: the Lease still names this holder; false once it released or was cut off.
	LeaseHeld bool `json:"leaseHeld"`
	// LeaseUnreadable: the user may not read the Lease, so renewals are not shown.
	LeaseUnreadable bool `json:"leaseUnreadable,omitempty"`
	// Recording: the Lease names this grant and the status does not record it yet (it
	// does with the holder's first renewal, at most 2 s after the grant).
	Recording bool `json:"recording,omitempty"`
}

// WaitingPod is one candidate, in grant order.
type WaitingPod struct {
	Pod     string          `json:"pod"`
	Created time.Time       `json:"created"`
	Age     metav1.Duration `json:"age"`
	Phase   corev1.PodPhase `json:"phase"`
}

// ConditionSummary is one status condition.
type ConditionSummary struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

func (o *Options) statusCommand() *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Who holds the grant, since when, how long it has left, and who waits in what order",
		Example: `  kubectl fencedlease status invoices
  kubectl fencedlease status invoices -n billing -o yaml`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeNames,
		RunE: o.runE(&out, func(cmd *cobra.Command, c client.Client, ns, name string) error {
			st, err := o.status(cmd, c, ns, name)
			if err != nil {
				return err
			}
			return out.print(o.Out, st, st.text)
		}),
	}
	out.bind(cmd)
	return cmd
}

// status reads the FencedLease, its Lease and its candidate pods.
func (o *Options) status(cmd *cobra.Command, c client.Client, ns, name string) (*Status, error) {
	ctx := cmd.Context()
	now := o.Clock.Now() // before what it measures
	fl := &fencingv1.FencedLease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, fl); err != nil {
		return nil, notFound(err, ns, name)
	}
	lease, leaseUnreadable, err := readLease(ctx, c, fl)
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{fencingv1.LeaseLabel: name}); err != nil {
		return nil, err
	}
	st := &Status{Namespace: ns, Name: name, Suspended: fl.Spec.Suspend, FencingToken: fl.Status.FencingToken,
		Transitions: fl.Status.Transitions, Revocations: fl.Status.Revocations, LastRevocation: fl.Status.LastRevocation,
		RevokeToken: fl.Annotations[fencingv1.RevokeAnnotation], Waiting: []WaitingPod{}, Ready: "Unknown", now: now}
	for _, cond := range fl.Status.Conditions {
		st.Conditions = append(st.Conditions, ConditionSummary{Type: cond.Type, Status: string(cond.Status), Reason: cond.Reason, Message: cond.Message})
	}
	if r := meta.FindStatusCondition(fl.Status.Conditions, fencingv1.ConditionReady); r != nil {
		st.Ready, st.ReadyReason, st.Message = string(r.Status), r.Reason, r.Message
	}
	if len(fl.Status.Slots) > 0 {
		if err := st.readSlots(cmd, c, fl); err != nil {
			return nil, err
		}
	} else if h, pending := currentGrant(fl, lease); h != nil {
		st.Holder = holderStatus(h, lease, now)
		st.Holder.LeaseUnreadable = leaseUnreadable
		st.Holder.Recording = pending
		st.Handoff = h.Handoff
	}
	// Nodes say which Warm standbys are passed over; a user who may not list them (most
	// namespaced roles) sees the order without that.
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		nodes.Items = nil
	}
	for _, p := range grantorder.Queue(pods.Items, nodes.Items, &fl.Status) {
		st.Waiting = append(st.Waiting, WaitingPod{Pod: p.Name, Created: p.CreationTimestamp.Time,
			Age: metav1.Duration{Duration: now.Sub(p.CreationTimestamp.Time)}, Phase: p.Status.Phase})
	}
	return st, nil
}

// readSlots fills the slots of fl, each with its holder as its own Lease shows it.
func (st *Status) readSlots(cmd *cobra.Command, c client.Client, fl *fencingv1.FencedLease) error {
	st.Holding = fl.Status.Holding
	for _, s := range fl.Status.Slots {
		ss := SlotStatus{Slot: s.Slot, LastRevocation: s.LastRevocation}
		lease, unreadable, err := readSlotLease(cmd.Context(), c, fl, s.Slot)
		if err != nil {
			return err
		}
		if h := s.Holder; h != nil {
			ss.Holder = holderStatus(h, lease, st.now)
			ss.Holder.LeaseUnreadable = unreadable
			ss.Handoff = h.Handoff
		}
		st.Slots = append(st.Slots, ss)
	}
	return nil
}

func holderStatus(h *fencingv1.Holder, lease *coordinationv1.Lease, now time.Time) *HolderStatus {
	hs := &HolderStatus{Pod: h.PodName, Token: h.Token, AcquireTime: h.AcquireTime.Time,
		LeaseDuration: metav1.Duration{Duration: time.Duration(h.LeaseDurationSeconds) * time.Second}, Confirmed: h.FirstRenewTime != nil}
	rec := leaserecord.Read(lease)
	if !rec.Exists || rec.Token != h.Token {
		return hs // the grant has not reached the Lease yet
	}
	hs.LeaseHeld = rec.Names(h.PodName, h.Token)
	if !rec.Renewed() {
		return hs // only the operator's grant-time write: no renewal yet
	}
	t := rec.RenewTime.Time
	since := metav1.Duration{Duration: now.Sub(t)}
	left := metav1.Duration{Duration: hs.LeaseDuration.Duration - since.Duration}
	hs.LastRenewTime, hs.SinceRenewal, hs.TimeLeft, hs.Confirmed = &t, &since, &left, true
	return hs
}

func (st *Status) text(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	ready := st.Ready
	if st.ReadyReason != "" {
		ready += " (" + st.ReadyReason + ")"
	}
	fmt.Fprintf(tw, "FencedLease:\t%s/%s\n", st.Namespace, st.Name)
	fmt.Fprintf(tw, "Ready:\t%s\n", ready)
	if st.Message != "" {
		fmt.Fprintf(tw, "Message:\t%s\n", st.Message)
	}
	if st.Suspended {
		fmt.Fprintf(tw, "Suspended:\tyes: no new grants until resumed\n")
	}
	switch h := st.Holder; {
	case st.Slots != nil:
		fmt.Fprintf(tw, "Slots:\t%s held\n", st.Holding)
	case h == nil:
		fmt.Fprintf(tw, "Holder:\tnone\n")
	default:
		fmt.Fprintf(tw, "Holder:\t%s, token %d, granted %s ago\n", h.Pod, h.Token, ago(st.now.Sub(h.AcquireTime)))
		if h.Recording {
			fmt.Fprintf(tw, "Status:\tnot recorded yet: the Lease names the grant; the status follows with its first renewal\n")
		}
		switch {
		case h.LeaseUnreadable:
			fmt.Fprintf(tw, "Renewed:\tunknown: no permission to read Lease %s/%s\n", st.Namespace, st.Name)
		case h.SinceRenewal == nil:
			fmt.Fprintf(tw, "Renewed:\tnot yet: starting (lease %s once it renews)\n", h.LeaseDuration.Duration)
		default:
			fmt.Fprintf(tw, "Renewed:\t%s ago, about %s left of its %s lease (the holder's clock against this one)\n",
				ago(h.SinceRenewal.Duration), ago(max(h.TimeLeft.Duration, 0)), h.LeaseDuration.Duration)
		}
		if !h.LeaseHeld && !h.LeaseUnreadable && h.Confirmed {
			fmt.Fprintf(tw, "Lease:\tno longer names it: cut off or released; the operator ends the grant\n")
		}
	}
	if ho := st.Handoff; ho != nil {
		fmt.Fprintf(tw, "Hand-off:\tasked to hand off to %s, grace %ds\n", ho.SuccessorName, ho.GracePeriodSeconds)
	}
	if st.RevokeToken != "" && st.Holder != nil && st.RevokeToken == fmt.Sprint(st.Holder.Token) {
		fmt.Fprintf(tw, "Revoke:\trequested for token %s\n", st.RevokeToken)
	}
	fmt.Fprintf(tw, "Tokens:\t%d issued, %d transitions, %d revocations\n", st.FencingToken, st.Transitions, st.Revocations)
	if rv := st.LastRevocation; rv != nil {
		reason := string(rv.Reason)
		if rv.Message != "" {
			reason += " (" + rv.Message + ")"
		}
		fmt.Fprintf(tw, "Last revoked:\t%s, token %d, %s, %s ago\n", rv.PodName, rv.Token, reason, ago(st.now.Sub(rv.Time.Time)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := st.slotsText(w); err != nil {
		return err
	}
	if len(st.Waiting) == 0 {
		_, err := fmt.Fprintln(w, "Waiting: none")
		return err
	}
	fmt.Fprintf(w, "Waiting (%d, in grant order):\n", len(st.Waiting))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tPOD\tAGE\tPHASE")
	for i, p := range st.Waiting {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", i+1, p.Pod, ago(p.Age.Duration), p.Phase)
	}
	return tw.Flush()
}

func notFound(err error, ns, name string) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("no FencedLease %q in namespace %q", name, ns)
	}
	return err
}

// slotsText is the table of the slots, one line each.
func (st *Status) slotsText(w io.Writer) error {
	if st.Slots == nil {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SLOT\tHOLDER\tTOKEN\tGRANTED\tRENEWED\tNOTE")
	for _, s := range st.Slots {
		h := s.Holder
		if h == nil {
			note := ""
			if rv := s.LastRevocation; rv != nil {
				note = fmt.Sprintf("last revoked: %s, token %d, %s, %s ago", rv.PodName, rv.Token, rv.Reason, ago(st.now.Sub(rv.Time.Time)))
			}
			fmt.Fprintf(tw, "  %d\t-\t-\t-\t-\t%s\n", s.Slot, note)
			continue
		}
		renewed := "not yet"
		switch {
		case h.LeaseUnreadable:
			renewed = "unknown"
		case h.SinceRenewal != nil:
			renewed = ago(h.SinceRenewal.Duration) + " ago"
		}
		note := ""
		if ho := s.Handoff; ho != nil {
			note = fmt.Sprintf("asked to hand off to %s, grace %ds", ho.SuccessorName, ho.GracePeriodSeconds)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%s ago\t%s\t%s\n", s.Slot, h.Pod, h.Token, ago(st.now.Sub(h.AcquireTime)), renewed, note)
	}
	return tw.Flush()
}
