// Command redis-leaderboard is a worked example: a singleton job that rebuilds a
// leaderboard in Redis, fenced by the token of its FencedLease grant. Run it in a labeled
// pod (Cold: FENCING_TOKEN is in its environment; Warm: it waits for the grant). A holder
// that paused past its lease and wakes after its successor wrote gets fence.ErrStaleToken,
// and none of its late commands run: they were queued in the same MULTI/EXEC as the check.
// Run Redis with the AOF on (appendonly yes): without it a restart forgets the token.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fencedlease/fencedlease/pkg/fence"
	"github.com/fencedlease/fencedlease/pkg/fence/redisfence"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "redis-leaderboard:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(ctrl.GetConfigOrDie())
	if err != nil {
		return err
	}
	cfg, err := holder.Config{Leases: holder.ClientGo(cs.CoordinationV1())}.NamesFromEnv()
	if err != nil {
		return err
	}
	h, err := holder.StartWhenGranted(ctx, cfg) // at once in a Cold pod: it was granted before it started
	if err != nil {
		return err
	}
	defer func() { _ = h.Release(context.Background()) }()

	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	f := &redisfence.Fence{Client: rdb}

	scores := map[string]float64{"ada": 42, "grace": 37, "linus": 29} // the job's work
	write, cancel := context.WithDeadline(h.Context(), h.Deadline())
	defer cancel()
	_, err = f.Tx(write, "leaderboard", h.Token(), func(p redis.Pipeliner) error {
		p.Del(write, "leaderboard")
		for who, score := range scores {
			p.ZAdd(write, "leaderboard", redis.Z{Score: score, Member: who})
		}
		p.Set(write, "leaderboard:built-by", h.Token(), 0)
		return nil
	})
	if errors.Is(err, fence.ErrStaleToken) {
		return fmt.Errorf("a newer holder rebuilt it first; this one stops: %w", err)
	}
	return err
}
