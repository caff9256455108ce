package plugin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

func (o *Options) revokeCommand() *cobra.Command {
	var out output
	var token int64
	var waitFor bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Ask the operator to revoke the current holder's grant",
		Long: `Ask the operator to revoke the current holder's grant. The request names the holder's
token (annotation ` + fencingv1.RevokeAnnotation + ` on the FencedLease), so it can never
reach a later grant. The operator clears the Lease at once, so the holder can renew no more
(a pkg/holder or agent holder stops at its next renewal), records a RevokeRequested event,
and grants the next pod once the lease the holder last renewed has run out: never two
holders (a grant that never renewed never ran, and is revoked at once). It needs the
right to update the FencedLease.`,
		Example: `  kubectl fencedlease revoke invoices
  kubectl fencedlease revoke invoices --token 41 --wait`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeNames,
		RunE: o.runE(&out, func(cmd *cobra.Command, c client.Client, ns, name string) error {
			return o.revoke(cmd.Context(), c, ns, name, token, waitFor, timeout, out)
		}),
	}
	cmd.Flags().Int64Var(&token, "token", 0, "Revoke only the grant with this token (default: the current holder's); a grant that already ended is an error.")
	cmd.Flags().BoolVar(&waitFor, "wait", false, "Wait until the operator has revoked it.")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "How long --wait waits.")
	out.bind(cmd)
	return cmd
}

func (o *Options) revoke(ctx context.Context, c client.Client, ns, name string, token int64, waitFor bool, timeout time.Duration, out output) error {
	fl := &fencingv1.FencedLease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, fl); err != nil {
		return notFound(err, ns, name)
	}
	lease, _, err := readLease(ctx, c, fl)
	if err != nil {
		return err
	}
	h, _ := currentGrant(fl, lease)
	switch {
	case h == nil:
		return fmt.Errorf("%s/%s has no holder to revoke", ns, name)
	case token != 0 && token != h.Token:
		return fmt.Errorf("%s/%s is held by %s with token %d, not %d: that grant has ended", ns, name, h.PodName, h.Token, token)
	}
	patch := client.MergeFrom(fl.DeepCopy())
	if fl.Annotations == nil {
		fl.Annotations = map[string]string{}
	}
	fl.Annotations[fencingv1.RevokeAnnotation] = strconv.FormatInt(h.Token, 10)
	if err := c.Patch(ctx, fl, patch); err != nil {
		return fmt.Errorf("requesting the revocation: %w", err)
	}
	switch {
	case out != "":
	case h.FirstRenewTime == nil && !leaserecord.Read(lease).GrantRenewed(fl.Name, h.PodName, h.PodUID, h.Token):
		fmt.Fprintf(o.Out, "revoke of token %d (pod %s) requested: it has not renewed yet, so it never ran and the operator revokes it at once\n",
			h.Token, h.PodName)
	default:
		fmt.Fprintf(o.Out, "revoke of token %d (pod %s) requested: the operator cuts it off now and grants the next pod when its %ds lease has run out\n",
			h.Token, h.PodName, h.LeaseDurationSeconds)
	}
	if waitFor {
		if err := waitRevoked(ctx, c, fl, h.Token, timeout); err != nil {
			return err
		}
		if out == "" {
			rv := fl.Status.LastRevocation
			if rv != nil && rv.Token == h.Token {
				fmt.Fprintf(o.Out, "token %d revoked (%s)\n", rv.Token, rv.Reason)
			} else {
				fmt.Fprintf(o.Out, "token %d ended: released before the revocation\n", h.Token)
			}
		}
	}
	if out == "" {
		return nil
	}
	return out.printObject(o.Out, fl)
}

// waitRevoked polls until grant token is no longer fl's holder; fl is left as last read.
func waitRevoked(ctx context.Context, c client.Client, fl *fencingv1.FencedLease, token int64, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(fl), fl); err != nil {
			return false, err
		}
		// Ended once the status has recorded the grant (its token) and names another or none.
		return fl.Status.FencingToken >= token && (fl.Status.Holder == nil || fl.Status.Holder.Token != token), nil
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("token %d still holds after %v", token, timeout)
	}
	return err
}

// suspendCommand is `suspend` (no new grants; the holder keeps its grant) or `resume`.
func (o *Options) suspendCommand(suspend bool) *cobra.Command {
	var out output
	use, short, done := "resume NAME", "Let the operator grant again", "resumed"
	if suspend {
		use, short, done = "suspend NAME", "Stop new grants (the current holder keeps its grant)", "suspended"
	}
	cmd := &cobra.Command{
		Use:               use,
		Short:             short,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeNames,
		RunE: o.runE(&out, func(cmd *cobra.Command, c client.Client, ns, name string) error {
			fl := &fencingv1.FencedLease{}
			if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: name}, fl); err != nil {
				return notFound(err, ns, name)
			}
			patch := client.MergeFrom(fl.DeepCopy())
			fl.Spec.Suspend = suspend
			if err := c.Patch(cmd.Context(), fl, patch); err != nil {
				return err
			}
			if out == "" {
				fmt.Fprintf(o.Out, "fencedlease.fencing.fencedlease.io/%s %s\n", fl.Name, done)
				return nil
			}
			return out.printObject(o.Out, fl)
		}),
	}
	out.bind(cmd)
	return cmd
}
