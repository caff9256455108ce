package agentcmd

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

const holdUsage = `usage: %s hold [flags] -- CMD [ARGS...]

Runs CMD while this pod holds its FencedLease's grant, like etcdctl lock but fenced: it
confirms the grant with a renewal, runs CMD with FENCING_TOKEN, FENCING_LEASE_NAME,
FENCING_LEASE_NAMESPACE and FENCING_HOLDER_IDENTITY set, renews while CMD runs, and when
the grant is lost sends CMD's process group SIGTERM and, --stop-grace later, SIGKILL:
before the operator can grant anyone else. When CMD exits the grant is released and hold
exits with CMD's status (128+N for a signal N); when the grant was lost, with 75.

In a Cold candidate it reads the grant from the environment the operator injected. In a
Warm standby (FENCING_TOKEN empty: the pod runs before it is granted) hold waits, on a watch
of the Lease, until the Lease names this pod, and runs CMD the moment the grant is
confirmed, with its token. Outside a labeled pod, name the candidate with --lease,
--namespace and --identity: hold waits the same way.

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
	uid := fs.String("uid", os.Getenv(fencingv1.EnvHolderUID), "The candidate pod's UID, so an earlier pod's grant of the same name is never taken (default $"+fencingv1.EnvHolderUID+").")
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
	cfg := holder.Config{Leases: leases, Namespace: *namespace, LeaseName: *lease, Identity: *identity, StopGrace: *grace,
		UID: types.UID(*uid)}
	// FENCING_SLOT comes from the slot annotation: empty until granted, and in a
	// FencedLease without slots. A Warm standby learns its slot from the Lease it is
	// granted on.
	slot := os.Getenv(fencingv1.EnvSlot)
	sharded := slot != ""
	cfg.Sharded = sharded
	if raw := os.Getenv(fencingv1.EnvToken); raw != "" {
		// A Cold candidate: started once granted, with its token (and slot).
		if cfg.Token, err = strconv.ParseInt(raw, 10, 64); err != nil || cfg.Token < 1 {
			return 1, fmt.Errorf("%s=%q is not a granted token", fencingv1.EnvToken, raw)
		}
		if sharded {
			s, err := strconv.ParseInt(slot, 10, 32)
			if err != nil || s < 0 {
				return 1, fmt.Errorf("%s=%q is not a granted slot", fencingv1.EnvSlot, slot)
			}
			cfg.Slot = int32(s)
		}
	} else {
		// A Warm standby, or outside a labeled pod: Exec waits for the grant on a watch.
		fmt.Fprintf(os.Stderr, "hold: waiting until Lease %s/%s names %s\n", cfg.Namespace, cfg.LeaseName, cfg.Identity)
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
