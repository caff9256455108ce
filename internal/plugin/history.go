package plugin

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/eventnote"
)

// HistoryEntry is one grant, release, revocation or request, oldest first.
type HistoryEntry struct {
	Time    time.Time `json:"time"`
	Reason  string    `json:"reason"`
	Type    string    `json:"type"`
	Pod     string    `json:"pod,omitempty"`
	Message string    `json:"message"`
	// Source is "event", or "status" for what only the FencedLease's status still shows
	// (events expire, by default after an hour).
	Source string `json:"source"`
}

// History is what `history` shows.
type History struct {
	Namespace string         `json:"namespace"`
	Name      string         `json:"name"`
	Entries   []HistoryEntry `json:"entries"`
	now       time.Time
}

func (o *Options) historyCommand() *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "Grants, releases and revocations as a timeline, from the operator's events and the status",
		Long: `Grants, releases and revocations as a timeline, oldest first, from the events the operator
records on the FencedLease. Events expire (kube-apiserver --event-ttl, an hour by default):
the last grant and the last revocation are also read from the status, so they show even
when their events are gone.`,
		Example:           `  kubectl fencedlease history invoices -o json`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeNames,
		RunE: o.runE(&out, func(cmd *cobra.Command, c client.Client, ns, name string) error {
			h, err := o.history(cmd, c, ns, name)
			if err != nil {
				return err
			}
			return out.print(o.Out, h, h.text)
		}),
	}
	out.bind(cmd)
	return cmd
}

func (o *Options) history(cmd *cobra.Command, c client.Client, ns, name string) (*History, error) {
	ctx := cmd.Context()
	now := o.Clock.Now()
	fl := &fencingv1.FencedLease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, fl); err != nil {
		return nil, notFound(err, ns, name)
	}
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: fields.SelectorFromSet(fields.Set{
		"involvedObject.kind": "FencedLease", "involvedObject.name": name,
	})}); err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	return historyOf(fl, events.Items, now), nil
}

// historyOf is the timeline of fl from its events and its status.
func historyOf(fl *fencingv1.FencedLease, events []corev1.Event, now time.Time) *History {
	h := &History{Namespace: fl.Namespace, Name: fl.Name, Entries: []HistoryEntry{}, now: now}
	for _, ev := range events {
		if ev.InvolvedObject.UID != "" && ev.InvolvedObject.UID != fl.UID {
			continue // a FencedLease of the same name that was deleted
		}
		e := HistoryEntry{Time: eventTime(&ev), Reason: ev.Reason, Type: ev.Type, Message: ev.Message, Source: "event"}
		if ev.Related != nil {
			e.Pod = ev.Related.Name
		}
		if ended, token, pod, ok := eventnote.SplitTransition(ev.Message); ok {
			// A failover's one event: the grant that ended, then the next.
			e.Message = ended
			h.Entries = append(h.Entries, e, HistoryEntry{Time: e.Time, Reason: "Granted", Type: corev1.EventTypeNormal,
				Pod: pod, Message: eventnote.Granted(token, pod), Source: "event"})
			continue
		}
		h.Entries = append(h.Entries, e)
	}
	if hd := fl.Status.Holder; hd != nil && !h.has("Granted", hd.PodName) {
		h.Entries = append(h.Entries, HistoryEntry{Time: hd.AcquireTime.Time, Reason: "Granted", Type: corev1.EventTypeNormal,
			Pod: hd.PodName, Source: "status", Message: eventnote.Granted(hd.Token, hd.PodName)})
	}
	if rv := fl.Status.LastRevocation; rv != nil && !h.has("Revoked", rv.PodName) {
		h.Entries = append(h.Entries, HistoryEntry{Time: rv.Time.Time, Reason: "Revoked", Type: corev1.EventTypeWarning,
			Pod: rv.PodName, Source: "status", Message: eventnote.Revoked(rv.Token, rv.PodName, string(rv.Reason))})
	}
	slices.SortStableFunc(h.Entries, func(a, b HistoryEntry) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return cmp.Compare(endsBeforeStarts[a.Reason], endsBeforeStarts[b.Reason])
	})
	return h
}

// endsBeforeStarts orders what one decision did (same time): a grant ends, then the next begins.
var endsBeforeStarts = map[string]int{"RevokeRequested": 0, "Revoked": 1, "Released": 1, "Granted": 2}

func (h *History) has(reason, pod string) bool {
	return slices.ContainsFunc(h.Entries, func(e HistoryEntry) bool { return e.Reason == reason && e.Pod == pod })
}

// eventTime is when an event last happened, whichever API wrote it.
func eventTime(ev *corev1.Event) time.Time {
	switch {
	case ev.Series != nil && !ev.Series.LastObservedTime.IsZero():
		return ev.Series.LastObservedTime.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.FirstTimestamp.IsZero():
		return ev.FirstTimestamp.Time
	}
	return ev.CreationTimestamp.Time
}

func (h *History) text(w io.Writer) error {
	if len(h.Entries) == 0 {
		_, err := fmt.Fprintf(w, "No grants, releases or revocations of %s/%s recorded (events expire after an hour by default).\n", h.Namespace, h.Name)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tAGO\tEVENT\tPOD\tMESSAGE")
	for _, e := range h.Entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Time.Local().Format("15:04:05.000"), ago(h.now.Sub(e.Time)), e.Reason, e.Pod, e.Message)
	}
	return tw.Flush()
}
