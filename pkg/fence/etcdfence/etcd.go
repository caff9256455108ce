// Package etcdfence fences writes to etcd: each fenced resource's highest accepted token
// is an etcd key, and a write is one transaction that compares that token and applies the
// caller's operations, so a holder whose grant ended cannot land a write after its
// successor's — whatever it was paused for.
//
// It is its own package so that importing pkg/fence does not link the etcd client.
package etcdfence

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fencedlease/fencedlease/pkg/fence"
)

// DefaultPrefix is where the tokens live: DefaultPrefix + resource.
const DefaultPrefix = "/fencing-tokens/"

// tokenWidth is the width the tokens are written in: etcd compares values as bytes, so
// every token is zero-padded to the 19 digits of the largest int64 and compares as a
// number does.
const tokenWidth = 19

// Fence fences writes to one etcd cluster.
type Fence struct {
	// Client reaches etcd.
	Client *clientv3.Client
	// Prefix defaults to DefaultPrefix. Keep the caller's keys out of it.
	Prefix string
	// Metrics counts accepted and refused writes (fencedlease_fence_writes_total, as the
	// other fences do); nil counts nothing.
	Metrics *fence.Metrics
}

// Txn applies ops in one etcd transaction if token is not older than the highest token
// accepted for resource, and records token as that highest; else it applies nothing and
// returns a *fence.StaleTokenError (errors.Is(err, fence.ErrStaleToken)). On success it
// returns the responses of ops, in order. The first write for a resource (no key yet) is
// told by the key's create revision, not by its value. ops must not touch the token key.
//
// An error other than a StaleTokenError means the outcome is unknown, as for any etcd
// write: a transaction sent before a timeout may still be applied (tested: one sent to a
// paused server landed when it resumed). Retry with the same token; the fence still
// refuses every older one.
func (f *Fence) Txn(ctx context.Context, resource string, token int64, ops ...clientv3.Op) ([]*etcdserverpb.ResponseOp, error) {
	if token < 1 {
		return nil, fmt.Errorf("etcdfence: token %d is not a granted token", token)
	}
	key := f.key(resource)
	for _, op := range ops {
		if (op.IsPut() || op.IsDelete()) && covers(op, key) {
			return nil, fmt.Errorf("etcdfence: an operation writes the token key %q", key)
		}
	}
	offered := encode(token)
	// Stale when the key exists and holds a larger token; a missing key is a first write.
	resp, err := f.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "!=", 0), clientv3.Compare(clientv3.Value(key), ">", offered)).
		Then(clientv3.OpGet(key)).
		Else(append([]clientv3.Op{clientv3.OpPut(key, offered)}, ops...)...).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("etcdfence: %w", err)
	}
	if resp.Succeeded {
		stored := int64(0)
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 {
			if stored, err = decode(kvs[0].Value); err != nil {
				return nil, fmt.Errorf("etcdfence: the token stored for %q: %w", resource, err)
			}
		}
		f.Metrics.Count(resource, false)
		return nil, &fence.StaleTokenError{Resource: resource, Offered: token, Stored: stored}
	}
	f.Metrics.Count(resource, true)
	return resp.Responses[1:], nil
}

// Stored is the highest token accepted for resource; 0 when none was.
func (f *Fence) Stored(ctx context.Context, resource string) (int64, error) {
	resp, err := f.Client.Get(ctx, f.key(resource))
	if err != nil {
		return 0, fmt.Errorf("etcdfence: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return decode(resp.Kvs[0].Value)
}

// covers is true when op's key, or its range, includes key.
func covers(op clientv3.Op, key string) bool {
	from, end := string(op.KeyBytes()), string(op.RangeBytes())
	switch end {
	case "":
		return from == key
	case "\x00":
		return key >= from
	}
	return key >= from && key < end
}

func (f *Fence) key(resource string) string {
	p := f.Prefix
	if p == "" {
		p = DefaultPrefix
	}
	return p + resource
}

func encode(token int64) string { return fmt.Sprintf("%0*d", tokenWidth, token) }

func decode(v []byte) (int64, error) {
	if len(v) != tokenWidth {
		return 0, errors.New("not a fixed-width token: " + strconv.Quote(string(v)))
	}
	return strconv.ParseInt(string(v), 10, 64)
}
