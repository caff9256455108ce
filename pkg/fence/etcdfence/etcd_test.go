package etcdfence_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencedlease/fencedlease/pkg/fence"
	"github.com/fencedlease/fencedlease/pkg/fence/etcdfence"
	"github.com/fencedlease/fencedlease/test/testenv"
)

func connect(t *testing.T, e *testenv.Etcd) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func waitUp(t *testing.T, c *clientv3.Client) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Get(ctx, "health")
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd not answering: %v", err)
		}
	}
}

func value(t *testing.T, c *clientv3.Client, key string) string {
	t.Helper()
	resp, err := c.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// The seed's story on a real etcd: holder 1 writes; it pauses past its lease; holder 2
// (token 2) writes; holder 1's late write is refused and changes nothing, also after the
// server paused and restarted. Tokens compare as numbers (9 < 10), and the first write
// needs no stored token.
func TestEtcdFenceRefusesTheOldHoldersLateWrite(t *testing.T) {
	e := testenv.StartEtcd(t)
	c := connect(t, e)
	waitUp(t, c)
	reg := prometheus.NewRegistry()
	f := &etcdfence.Fence{Client: c, Metrics: fence.NewMetrics(reg)}
	ctx := context.Background()

	if _, err := f.Txn(ctx, "report", 9, clientv3.OpPut("/reports/latest", "from token 9")); err != nil {
		t.Fatalf("the first write: %v", err)
	}
	resps, err := f.Txn(ctx, "report", 10, clientv3.OpPut("/reports/latest", "from token 10"), clientv3.OpGet("/reports/latest"))
	if err != nil {
		t.Fatalf("token 10 after 9: %v", err)
	}
	if got := string(resps[1].GetResponseRange().Kvs[0].Value); got != "from token 10" {
		t.Fatalf("the caller's responses: read %q in the same transaction", got)
	}
	_, err = f.Txn(ctx, "report", 9, clientv3.OpPut("/reports/latest", "late, from token 9"))
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || !errors.Is(err, fence.ErrStaleToken) || stale.Stored != 10 || stale.Offered != 9 {
		t.Fatalf("token 9 after 10: %v, want a StaleTokenError with 10 stored", err)
	}
	if got := value(t, c, "/reports/latest"); got != "from token 10" {
		t.Fatalf("the refused write landed: %q", got)
	}
	if _, err := f.Txn(ctx, "report", 10, clientv3.OpPut("/reports/latest", "again from token 10")); err != nil {
		t.Fatalf("the same token again (a retry in one generation): %v", err)
	}

	t.Log("a paused server: writes fail (not as stale) until it resumes")
	e.Pause()
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = f.Txn(short, "report", 11, clientv3.OpPut("/reports/latest", "during the pause"))
	cancel()
	if err == nil || errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("a write to a paused etcd: %v, want a plain error", err)
	}
	e.Resume()
	waitUp(t, c)

	t.Log("a restarted server keeps the token: the old holder is still refused")
	e.Restart()
	waitUp(t, c)
	if _, err := f.Txn(ctx, "report", 9, clientv3.OpPut("/reports/latest", "after the restart, from token 9")); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("token 9 after a restart: %v, want ErrStaleToken", err)
	}
	// The write that timed out during the pause had been sent: etcd may apply it once it
	// resumes. An error says "unknown", not "not applied" — as for any etcd write.
	if stored, err := f.Stored(ctx, "report"); err != nil || (stored != 10 && stored != 11) {
		t.Fatalf("stored %d, %v; want 10, or 11 if the write sent during the pause landed", stored, err)
	}
	if got := testenv.FenceWrites(reg, "report", "stale"); got != 2 {
		t.Fatalf("stale writes counted: %v, want 2", got)
	}
}

// Racing writers with random tokens: whatever the interleaving, no write is accepted after
// a higher token's, and the stored token is the highest offered.
func TestEtcdFenceUnderRacingWriters(t *testing.T) {
	e := testenv.StartEtcd(t)
	c := connect(t, e)
	waitUp(t, c)
	f := &etcdfence.Fence{Client: c, Prefix: "/fence/"}
	ctx := context.Background()
	type accepted struct {
		token int64
		rev   int64
	}
	results := make(chan accepted, 200)
	done := make(chan struct{})
	for w := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 25 {
				token := int64(1 + (w*7+i*13)%40)
				resps, err := f.Txn(ctx, "r", token, clientv3.OpPut("/data", "x"))
				if err == nil {
					results <- accepted{token, resps[0].GetResponsePut().Header.Revision}
				} else if !errors.Is(err, fence.ErrStaleToken) {
					t.Error(err)
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	close(results)
	var all []accepted
	for a := range results {
		all = append(all, a)
	}
	slices.SortFunc(all, func(a, b accepted) int { return cmp.Compare(a.rev, b.rev) })
	for i := 1; i < len(all); i++ {
		if all[i].token < all[i-1].token {
			t.Fatalf("token %d accepted at revision %d after token %d at %d", all[i].token, all[i].rev, all[i-1].token, all[i-1].rev)
		}
	}
	if stored, _ := f.Stored(ctx, "r"); len(all) == 0 || stored != all[len(all)-1].token || stored != 40 {
		t.Fatalf("stored %d after %d accepted writes, want 40, the highest offered", stored, len(all))
	}
}

// An operation that writes the token key itself is refused before anything is sent.
func TestEtcdFenceRefusesOpsOnItsOwnKey(t *testing.T) {
	f := &etcdfence.Fence{}
	for _, op := range []clientv3.Op{
		clientv3.OpPut(etcdfence.DefaultPrefix+"r", "1"),
		clientv3.OpDelete(etcdfence.DefaultPrefix, clientv3.WithPrefix()),
		clientv3.OpDelete("", clientv3.WithFromKey()),
	} {
		if _, err := f.Txn(context.Background(), "r", 1, op); err == nil {
			t.Fatalf("op %v on the token key was accepted", op)
		}
	}
}

// The shards of a FencedLease with slots are fenced per slot (fence.ForSlot): slot 0's
// holder still writes after slot 1's newer token did; an older holder of slot 0 is refused.
func TestEtcdFenceFencesEachSlotApart(t *testing.T) {
	e := testenv.StartEtcd(t)
	c := connect(t, e)
	waitUp(t, c)
	f := &etcdfence.Fence{Client: c}
	for _, step := range []struct {
		slot  int32
		token int64
		stale bool
	}{{1, 5, false}, {0, 4, false}, {0, 6, false}, {0, 4, true}, {1, 5, false}} {
		key := fmt.Sprintf("/reports/shard-%d", step.slot)
		_, err := f.Txn(context.Background(), fence.ForSlot("report", step.slot), step.token, clientv3.OpPut(key, "x"))
		if stale := errors.Is(err, fence.ErrStaleToken); stale != step.stale || err != nil && !stale {
			t.Fatalf("slot %d token %d: %v (stale wanted: %v)", step.slot, step.token, err, step.stale)
		}
	}
}
