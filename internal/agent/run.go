// Package agent is the renewal sidecar (fencedlease-agent agent) for workloads that do
// not link pkg/holder: it holds the pod's grant with a holder.Holder and publishes its
// view of it to the workload, in a file and on a localhost endpoint. Its startupProbe
// (Probe) passes once the Lease shows the grant renewed. The package is internal: its
// state file's JSON is the contract (docs/reference.md), not these Go names.
package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/fencedlease/fencedlease/pkg/holder"
)

// Options say where the agent publishes its State.
type Options struct {
	// StateFile is written on every change (empty: none).
	StateFile string
	// Listen is a localhost address whose /state answers with the state (empty: none).
	Listen string
}

// Run is the renewal sidecar's loop, for workloads that do not link this package:
// it holds the grant until ctx ends (the pod stops), and publishes what it knows (see
// State). In a Warm standby (cfg.Token 0) it first publishes Waiting and waits for the
// grant on a watch of the Lease. When renewals fail past the deadline it says Lost and
// keeps trying: while the Lease still names this pod and token the grant may still be its
// own (the operator revokes only a lease later), and a confirmed renewal makes it Holding
// again. It stops
// renewing only once the grant has certainly moved on (the Lease names someone else, or
// was released). A hand-off request is logged and published as Draining; the agent keeps
// renewing, because it cannot know when the workload reached a safe point. The workload
// releases itself (it may clear holderIdentity on its own Lease), or is revoked after
// the grace period.
func Run(ctx context.Context, cfg holder.Config, opts Options, log logr.Logger) error {
	c := cfg.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	board := newStateBoard(opts.StateFile, cfg.Token, c, log)
	if cfg.Sharded && cfg.Token != 0 {
		board.setSlot(cfg.Slot)
	}
	if opts.Listen != "" {
		// A port the workload took must not cost the grant: the file still works.
		if err := serveState(ctx, opts.Listen, board, log); err != nil {
			log.Error(err, "not serving the state endpoint; the state file still works", "address", opts.Listen)
		}
	}
	if cfg.Token == 0 {
		// A Warm standby: publish Waiting, and wait on a watch of the Lease until it names
		// this pod; from then on the agent holds the grant as in a Cold pod.
		log.Info("waiting for the grant", "lease", cfg.LeaseName)
		granted, err := holder.Granted(ctx, cfg)
		if err != nil {
			return nil // the pod is stopping
		}
		cfg = granted // token and slot as the Lease granted them
		if cfg.Sharded {
			board.setSlot(cfg.Slot)
		}
		board.set(StateStarting, cfg.Token, nil, "")
	}
	cfg.Callbacks.OnRenewed = func(deadline time.Time) { board.renewed(cfg.Token, deadline) }
	cfg.Callbacks.OnDraining = func(successor string) {
		log.Info("asked to hand off to a newer revision; the workload should release at a safe point",
			"lease", cfg.LeaseName, "token", cfg.Token, "successor", successor)
		st := board.get()
		board.set(StateDraining, cfg.Token, st.Deadline, "")
	}
	retry := time.Second
	for {
		h, err := holder.Start(ctx, cfg)
		if err == nil {
			log.Info("holding grant", "lease", cfg.LeaseName, "token", cfg.Token)
			<-h.Context().Done()
			if ctx.Err() != nil {
				return nil // the pod is stopping: leave the grant to expire or be released
			}
			err = h.Err()
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, holder.ErrRevoked), errors.Is(err, holder.ErrReleased):
			log.Info("the grant has moved on; nothing left to renew", "reason", err.Error())
			board.set(StateEnded, cfg.Token, nil, err.Error())
			<-ctx.Done()
			return nil
		case errors.Is(err, holder.ErrDeadline):
			log.Info("no renewal confirmed before the deadline; the workload must stop; trying again while the grant may still be ours")
			board.set(StateLost, cfg.Token, nil, err.Error())
		default:
			log.Error(err, "confirming the grant; retrying", "in", retry)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.After(retry):
		}
	}
}

// serveState answers on addr/state until ctx ends.
func serveState(ctx context.Context, addr string, board *stateBoard, log logr.Logger) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("the state endpoint: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/state", board)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.Info("serving the agent's state", "url", "http://"+l.Addr().String()+"/state")
	return nil
}
