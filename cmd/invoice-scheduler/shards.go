package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/fencedlease/fencedlease/pkg/fence"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

// shardOf is the shard (the FencedLease's slot) a tenant belongs to, of shards.
func shardOf(tenant string, shards int) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(tenant))
	return int32(h.Sum32() % uint32(shards))
}

// runShard is the scheduler of one shard of a FencedLease with slots: it invoices, period
// after period, the tenants whose shard is the slot it holds, every write fenced per slot
// (fence.ForSlot), until periods are done or its grant ends. A write refused as stale
// means a newer holder of its own slot has written: it stops.
func runShard(ctx context.Context, h *holder.Holder, l *ledger, by string, tenants []string, shards, periods int, work time.Duration) (int, error) {
	slot := h.Slot()
	var mine []string
	for _, t := range tenants {
		if shardOf(t, shards) == slot {
			mine = append(mine, t)
		}
	}
	say("slot %d: holding token %d; my tenants: %s", slot, h.Token(), strings.Join(mine, ", "))
	for p := 1; p <= periods; p++ {
		period := fmt.Sprintf("2026-%02d", p)
		for _, tenant := range mine {
			if h.Context().Err() != nil {
				say("slot %d: grant lost (%v); not writing", slot, h.Err())
				return exitLost, nil
			}
			say("grant valid; writing %s/%s in %v", tenant, period, work)
			time.Sleep(work)
			created, err := l.createRunIn(ctx, fence.ForSlot("invoices", slot), tenant, period, h.Token(), by)
			var stale *fence.StaleTokenError
			switch {
			case errors.As(err, &stale):
				say("slot %d: REJECTED by the ledger: %v", slot, stale)
				return exitStale, nil
			case err != nil:
				return 1, err
			case created:
				say("slot %d: invoice run %s/%s created with token %d", slot, tenant, period, h.Token())
			default:
				say("slot %d: invoice run %s/%s already exists; nothing charged twice (token %d)", slot, tenant, period, h.Token())
			}
		}
	}
	return 0, nil
}
