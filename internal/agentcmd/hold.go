package agentcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/internal/leaserecord"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

const holdUsage = `usage: %s hold [flags] -- CMD [ARGS...]

Runs CMD while this pod holds its FencedLease's grant, like etcdctl lock but fenced: it
confirms the grant with a renewal, runs CMD with FENCING_TOKEN, FENCING_LEASE_NAME,
FENCING_LEASE_NAMESPACE and FENCING_HOLDER_IDENTITY set, renews while CMD runs, and when
the grant is lost sends CMD's process group SIGTERM and, --stop-grace later, SIGKILL:
before the operator can grant anyone else. When CMD exits the grant is released and hold
exits with CMD's status (128+N for a signal N); when the grant was lost, with 75.

In a labeled pod it reads the grant from the environment the operator injected. Outside
one, name it with --lease, --namespace and --identity (the candidate pod): hold waits
until the Lease names that pod, and takes its token.

flags:
`

// Hold is `hold`; it returns the status to exit with.
func Hold(args []string) (int, error) {
	fs := flag.NewFlagSet("hold", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintf(fs.Output(), holdUsage, filepath.Base(os.Args[0])); fs.PrintDefaults() }
	grace := fs.Duration("stop-grace", 2*time.Second,
		"Time CMD gets between SIGTERM and SIGKILL when the grant is lost; renewals give up that much earlier, so it must fit in the lease with room for a renewal.")
	lease := fs.String("lease", os.Getenv(fencingv1.EnvLeaseName), "The FencedLease (default $"+fencingv1.EnvLeaseName+").")
	namespace := fs.String("namespace", os.Getenv(fencingv1.EnvLeaseNamespace), "Its namespace (default $"+fencingv1.EnvLeaseNamespace+").")
	identity := fs.String("identity", os.Getenv(fencingv1.EnvHolderIdentity), "The candidate pod's name (default $"+fencingv1.EnvHolderIdentity+").")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	command := fs.Args()
	if len(command) == 0 || *lease == "" || *namespace == "" || *identity == "" {
		fs.Usage()
		return 2, errors.New("need CMD after --, and the lease, namespace and identity (flags or the injected environment)")
	}
	leases, err := leaseClient()
	if err != nil {
		return 1, err
	}
	ctx := signalContext()
	cfg := holder.Config{Leases: leases, Namespace: *namespace, LeaseName: *lease, Identity: *identity, StopGrace: *grace}
	if cfg.Token, err = strconv.ParseInt(os.Getenv(fencingv1.EnvToken), 10, 64); err != nil || cfg.Token < 1 {
		fmt.Fprintf(os.Stderr, "hold: waiting until Lease %s/%s names %s\n", cfg.Namespace, cfg.LeaseName, cfg.Identity)
		if cfg.Token, err = waitForGrant(ctx, cfg.Leases, cfg.Namespace, cfg.LeaseName, cfg.Identity); err != nil {
			return 1, err
		}
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	res, err := holder.Exec(ctx, cfg, cmd)
	if err != nil {
		return 1, err
	}
	if res.Lost != nil {
		fmt.Fprintf(os.Stderr, "hold: %v; %s was stopped\n", res.Lost, command[0])
		return holder.ExitGrantLost, nil
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return res.ExitCode, nil
}

// waitForGrant polls the Lease until it names identity, and returns its token.
func waitForGrant(ctx context.Context, leases holder.LeaseClients, ns, name, identity string) (int64, error) {
	var token int64
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		l, err := leases.Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		rec := leaserecord.Read(l)
		token = rec.Token
		return rec.Names(identity, token) && token > 0, nil
	})
	return token, err
}
