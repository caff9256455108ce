// Package redisfence fences writes to Redis: each fenced resource's highest accepted token
// is a Redis key, and a write is one MULTI/EXEC transaction, guarded by WATCH on that key,
// that records the token and runs the caller's commands — so a holder whose grant ended
// cannot land a write after its successor's.
//
// It is its own package so that importing pkg/fence does not link the Redis client.
package redisfence

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlease/fencedlease/pkg/fence"
)

// DefaultPrefix is where the tokens live: DefaultPrefix + resource.
const DefaultPrefix = "fencing-tokens:"

// Fence fences writes to one Redis server (or a cluster, for keys in one hash slot).
type Fence struct {
	// Client reaches Redis: a *redis.Client, or a *redis.ClusterClient when the token key
	// and the caller's keys share a hash slot (put the resource in braces: "{tenant-7}").
	Client redis.UniversalClient
	// Prefix defaults to DefaultPrefix. Keep the caller's keys out of it.
	Prefix string
	// Metrics counts accepted and refused writes (fencedlease_fence_writes_total); nil
	// counts nothing.
	Metrics *fence.Metrics
	// Attempts bounds the retries when another writer of the same resource changed the
	// token between the check and the write; default 16.
	Attempts int
}

// ErrContended is returned when other writers of the resource kept changing its token for
// all of Attempts: nothing was written; try again.
var ErrContended = errors.New("redisfence: the token changed under every attempt")

// Tx runs the commands fn queues in one MULTI/EXEC if token is not older than the
// highest token accepted for resource, and records token as that highest; else it runs
// nothing and returns a *fence.StaleTokenError (errors.Is(err, fence.ErrStaleToken)). The
// token key is WATCHed from its read to the EXEC, so a concurrent writer makes the EXEC
// fail and the check is made again. It returns the queued commands, answered. fn may be
// called more than once; it must only queue commands (on the pipeliner it is given) and
// not touch the token key.
func (f *Fence) Tx(ctx context.Context, resource string, token int64, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	if token < 1 {
		return nil, fmt.Errorf("redisfence: token %d is not a granted token", token)
	}
	key := f.key(resource)
	attempts := f.Attempts
	if attempts <= 0 {
		attempts = 16
	}
	for range attempts {
		var cmds []redis.Cmder
		var stale *fence.StaleTokenError
		err := f.Client.Watch(ctx, func(tx *redis.Tx) error {
			stored, err := tx.Get(ctx, key).Int64()
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			if stored > token {
				stale = &fence.StaleTokenError{Resource: resource, Offered: token, Stored: stored}
				return nil
			}
			cmds, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				pipe.Set(ctx, key, strconv.FormatInt(token, 10), 0)
				return fn(pipe)
			})
			return err
		}, key)
		switch {
		case errors.Is(err, redis.TxFailedErr):
			continue // the token changed since it was read: judge again
		case err != nil:
			return nil, fmt.Errorf("redisfence: %w", err)
		case stale != nil:
			f.Metrics.Count(resource, false)
			return nil, stale
		}
		f.Metrics.Count(resource, true)
		return cmds[1:], nil
	}
	return nil, ErrContended
}

// Stored is the highest token accepted for resource; 0 when none was (or Redis lost it).
func (f *Fence) Stored(ctx context.Context, resource string) (int64, error) {
	v, err := f.Client.Get(ctx, f.key(resource)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

func (f *Fence) key(resource string) string {
	p := f.Prefix
	if p == "" {
		p = DefaultPrefix
	}
	return p + resource
}
