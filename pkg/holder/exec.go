package holder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// ExitGrantLost is the exit status `fencedlease hold` reports when the grant ended before
// the command did and the command was stopped (EX_TEMPFAIL: try again later).
const ExitGrantLost = 75

// ExecResult says how a supervised command ended.
type ExecResult struct {
	// ExitCode is the command's exit status (-1 when a signal ended it).
	ExitCode int
	// Lost is why the grant ended before the command did (ErrDeadline, ErrRevoked, ...),
	// or nil when the command ended on its own or ctx ended.
	Lost error
	// Signalled is when the command was sent SIGTERM (zero when it was not); Exited is when
	// it was seen to end.
	Signalled, Exited time.Time
}

// Exec runs cmd while this process holds the grant cfg names, for workloads in any
// language. With cfg.Token 0 (a Warm standby, whose FENCING_TOKEN is empty) it first waits
// for the grant with StartWhenGranted, so cmd starts the moment it is confirmed. It
// confirms the grant with a first renewal, starts cmd in a process group of
// its own with the grant in its environment (FENCING_TOKEN, FENCING_LEASE_NAME,
// FENCING_LEASE_NAMESPACE, FENCING_HOLDER_IDENTITY), and renews while it runs.
//
// When the grant is lost (renewals fail past the deadline, it is revoked or moved on),
// the group gets SIGTERM and, cfg.StopGrace later, SIGKILL. The renew deadline is
// shortened by StopGrace, so the command is dead before the operator may grant anyone
// else — on this machine's clock, and given the drift margin (see Config). When ctx ends
// (this process is asked to stop), the group is stopped the same way and then the grant
// released. When the command ends on its own, the grant is released at once, so the next
// pod starts without waiting out the lease.
func Exec(ctx context.Context, cfg Config, cmd *exec.Cmd) (ExecResult, error) {
	if cfg.StopGrace <= 0 {
		return ExecResult{}, errors.New("Exec needs a StopGrace: how long the command gets between SIGTERM and SIGKILL")
	}
	start := Start
	if cfg.Token == 0 {
		start = StartWhenGranted // a Warm standby: wait for the grant, then run
	}
	h, err := start(ctx, cfg)
	if err != nil {
		return ExecResult{}, err
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env,
		fencingv1.EnvToken+"="+strconv.FormatInt(h.Token(), 10),
		fencingv1.EnvLeaseName+"="+cfg.LeaseName,
		fencingv1.EnvLeaseNamespace+"="+cfg.Namespace,
		fencingv1.EnvHolderIdentity+"="+cfg.Identity)
	if h.cfg.Sharded { // the grant says so, whatever the environment did
		cmd.Env = append(cmd.Env, fencingv1.EnvSlot+"="+strconv.Itoa(int(h.Slot())))
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true // the whole group is stopped, not just the shell
	if err := cmd.Start(); err != nil {
		_ = h.Release(context.WithoutCancel(ctx))
		return ExecResult{}, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()

	var res ExecResult
	c := h.cfg.Clock
	select {
	case <-exited:
	case <-h.Context().Done():
		res.Lost = h.Err()
		res.Signalled = stop(cmd, exited, cfg.StopGrace, c)
	case <-ctx.Done():
		res.Signalled = stop(cmd, exited, cfg.StopGrace, c)
	}
	res.Exited = c.Now()
	res.ExitCode = cmd.ProcessState.ExitCode()
	// The command is gone: hand over now rather than after the lease. After a loss this is
	// best effort (a Lease that moved on is left alone; a cut link fails).
	release, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := h.Release(release); err != nil && res.Lost == nil {
		return res, fmt.Errorf("releasing the grant: %w", err)
	}
	return res, nil
}

const releaseTimeout = 10 * time.Second

// stop sends the command's group SIGTERM, and SIGKILL if it has not ended after grace; it
// returns when the command has ended, with the time SIGTERM was sent.
func stop(cmd *exec.Cmd, exited <-chan struct{}, grace time.Duration, c clock.Clock) time.Time {
	at := c.Now()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-c.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	return at
}
