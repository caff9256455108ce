package redisfence_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedlease/fencedlease/pkg/fence"
	"github.com/fencedlease/fencedlease/pkg/fence/redisfence"
	"github.com/fencedlease/fencedlease/test/testenv"
)

func connect(t *testing.T, r *testenv.Redis) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	waitUp(t, c)
	return c
}

func waitUp(t *testing.T, c *redis.Client) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis not answering: %v", err)
		}
	}
}

func publish(report string) func(redis.Pipeliner) error {
	return func(p redis.Pipeliner) error {
		p.Set(context.Background(), "report:latest", report, 0)
		p.Get(context.Background(), "report:latest")
		return nil
	}
}

// The seed's story on a real Redis with the AOF on: token 1 writes, token 2 writes, token
// 1's late write is refused and runs nothing — also after the server paused, and after it
// was killed and restarted.
func TestRedisFenceRefusesTheOldHoldersLateWrite(t *testing.T) {
	srv := testenv.StartRedis(t, true)
	c := connect(t, srv)
	reg := prometheus.NewRegistry()
	f := &redisfence.Fence{Client: c, Metrics: fence.NewMetrics(reg)}
	ctx := context.Background()

	if _, err := f.Tx(ctx, "report", 1, publish("from token 1")); err != nil {
		t.Fatalf("the first write: %v", err)
	}
	cmds, err := f.Tx(ctx, "report", 2, publish("from token 2"))
	if err != nil {
		t.Fatalf("token 2 after 1: %v", err)
	}
	if got := cmds[1].(*redis.StringCmd).Val(); got != "from token 2" {
		t.Fatalf("the caller's commands ran in the transaction: read %q", got)
	}
	_, err = f.Tx(ctx, "report", 1, publish("late, from token 1"))
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || stale.Stored != 2 || stale.Offered != 1 {
		t.Fatalf("token 1 after 2: %v, want a StaleTokenError with 2 stored", err)
	}
	if got := c.Get(ctx, "report:latest").Val(); got != "from token 2" {
		t.Fatalf("the refused write ran: %q", got)
	}

	t.Log("paused: a write fails (not as stale); resumed, the fence holds")
	srv.Pause()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = f.Tx(short, "report", 3, publish("during the pause"))
	cancel()
	srv.Resume()
	if err == nil || errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("a write to a paused Redis: %v, want a plain error", err)
	}
	waitUp(t, c)

	t.Log("killed and restarted with the AOF on: the token survives")
	srv.Restart()
	waitUp(t, c)
	if _, err := f.Tx(ctx, "report", 1, publish("after the restart, from token 1")); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("token 1 after a restart: %v, want ErrStaleToken", err)
	}
	if got := c.Get(ctx, "report:latest").Val(); got != "from token 2" {
		t.Fatalf("after the restart the report is %q", got)
	}
}

// With the AOF off (and no snapshot), a restart loses the token: the fence then accepts
// the old holder's write. docs/fencing/redis.md says so; this pins it down.
func TestRedisFenceWithoutPersistenceForgetsAcrossARestart(t *testing.T) {
	srv := testenv.StartRedis(t, false)
	c := connect(t, srv)
	f := &redisfence.Fence{Client: c}
	ctx := context.Background()
	if _, err := f.Tx(ctx, "report", 2, publish("from token 2")); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	waitUp(t, c)
	if stored, _ := f.Stored(ctx, "report"); stored != 0 {
		t.Fatalf("stored %d after a restart without persistence, want 0 (lost)", stored)
	}
	if _, err := f.Tx(ctx, "report", 1, publish("late, from token 1")); err != nil {
		t.Fatalf("with the token lost, token 1 is accepted: %v", err)
	}
}

// Racing writers: WATCH makes a concurrent change of the token fail the EXEC, so no write
// is ever accepted after a higher token's; the last accepted token is the highest offered.
func TestRedisFenceUnderRacingWriters(t *testing.T) {
	srv := testenv.StartRedis(t, false)
	c := connect(t, srv)
	f := &redisfence.Fence{Client: c, Attempts: 1000}
	ctx := context.Background()
	var order []int64 // tokens in the order their writes ran, read back from the list
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				token := int64(1 + (w*7+i*13)%40)
				_, err := f.Tx(ctx, "r", token, func(p redis.Pipeliner) error {
					p.RPush(ctx, "accepted", token)
					return nil
				})
				if err != nil && !errors.Is(err, fence.ErrStaleToken) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	vals, err := c.LRange(ctx, "accepted", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vals {
		tok, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, tok)
	}
	for i := 1; i < len(order); i++ {
		if order[i] < order[i-1] {
			t.Fatalf("token %d accepted after token %d", order[i], order[i-1])
		}
	}
	if stored, _ := f.Stored(ctx, "r"); len(order) == 0 || stored != 40 || order[len(order)-1] != 40 {
		t.Fatalf("stored %d after %d accepted writes, want 40", stored, len(order))
	}
}

// The shards of a FencedLease with slots are fenced per slot (fence.ForSlot): slot 0's
// holder still writes after slot 1's newer token did; an older holder of slot 0 is refused.
func TestRedisFenceFencesEachSlotApart(t *testing.T) {
	srv := testenv.StartRedis(t, false)
	f := &redisfence.Fence{Client: connect(t, srv)}
	for _, step := range []struct {
		slot  int32
		token int64
		stale bool
	}{{1, 5, false}, {0, 4, false}, {0, 6, false}, {0, 4, true}, {1, 5, false}} {
		_, err := f.Tx(context.Background(), fence.ForSlot("report", step.slot), step.token, publish("shard"))
		if stale := errors.Is(err, fence.ErrStaleToken); stale != step.stale || err != nil && !stale {
			t.Fatalf("slot %d token %d: %v (stale wanted: %v)", step.slot, step.token, err, step.stale)
		}
	}
}
