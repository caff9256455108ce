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
// not passed. A Cold pod starts granted (FENCING_TOKEN set); a Warm one waits for its
// grant and takes the token from it. A zombie ignores its Holder once granted: it writes
// whatever happens to its grant, for the fence to stop.
func ownHolder(ctx context.Context, zombie bool) (grantCheck, int64, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, 0, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, 0, err
	}
	base := holder.Config{Leases: holder.ClientGo(cs.CoordinationV1())}
	var h *holder.Holder
	if os.Getenv("FENCING_TOKEN") != "" {
		if base, err = base.FromEnv(); err == nil {
			h, err = holder.Start(ctx, base)
		}
	} else if base, err = base.NamesFromEnv(); err == nil {
		h, err = holder.StartWhenGranted(ctx, base)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("confirming the grant: %w", err)
	}
	fmt.Printf("T=%d holding token %d\n", time.Now().UnixNano(), h.Token())
	if zombie {
		return func() (bool, time.Time) { return true, time.Now().Add(2 * time.Second) }, h.Token(), nil
	}
	return func() (bool, time.Time) {
		now, until := time.Now(), h.Deadline()
		return h.Context().Err() == nil && now.Before(until), until
	}, h.Token(), nil
}
