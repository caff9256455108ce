package s3fence_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedlease/fencedlease/pkg/fence"
	"github.com/fencedlease/fencedlease/pkg/fence/s3fence"
	"github.com/fencedlease/fencedlease/test/testenv"
)

const bucket = "reports"

// connect makes a client and the bucket, waiting for the server to answer.
func connect(t *testing.T, s *testenv.S3) *minio.Client {
	t.Helper()
	c, err := minio.New(s.Endpoint(), &minio.Options{Creds: credentials.NewStaticV4(testenv.S3AccessKey, testenv.S3SecretKey, ""), MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = c.BucketExists(ctx, bucket)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the S3 server is not answering: %v", err)
		}
	}
	if ok, _ := c.BucketExists(context.Background(), bucket); !ok {
		if err := c.MakeBucket(context.Background(), bucket, minio.MakeBucketOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func contents(t *testing.T, c *minio.Client, key string) []string {
	t.Helper()
	var keys []string
	for obj := range c.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: key + s3fence.ContentInfix, Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

func current(t *testing.T, f *s3fence.Fence, key string) (string, int64) {
	t.Helper()
	body, token, err := f.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return string(body), token
}

// The seed's story on a real S3-compatible server: holder 1 publishes the report; it
// pauses past its lease; holder 2 (token 2) publishes; holder 1's late write is refused
// and changes nothing (its content is not left behind) — also after the server paused,
// and after it was killed and restarted.
func TestS3FenceRefusesTheOldHoldersLateWrite(t *testing.T) {
	srv := testenv.StartS3(t, false)
	c := connect(t, srv)
	reg := prometheus.NewRegistry()
	f := &s3fence.Fence{Client: c, Bucket: bucket, Metrics: fence.NewMetrics(reg)}
	ctx := context.Background()
	const key = "daily/2026-12-01.csv"

	if _, _, err := f.Get(ctx, key); !errors.Is(err, s3fence.ErrNotFound) {
		t.Fatalf("get before any write: %v, want ErrNotFound", err)
	}
	if err := f.Put(ctx, key, 1, []byte("from token 1"), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("the first write: %v", err)
	}
	if err := f.Put(ctx, key, 2, []byte("from token 2"), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("token 2 after 1: %v", err)
	}
	err := f.Put(ctx, key, 1, []byte("late, from token 1"), minio.PutObjectOptions{})
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || stale.Stored != 2 || stale.Offered != 1 || stale.Resource != bucket+"/"+key {
		t.Fatalf("token 1 after 2: %v, want a StaleTokenError with 2 stored", err)
	}
	if body, token := current(t, f, key); body != "from token 2" || token != 2 {
		t.Fatalf("after the refused write: %q from token %d", body, token)
	}
	if got := contents(t, c, key); len(got) != 1 {
		t.Fatalf("content objects %v, want only the current one (the replaced one deleted)", got)
	}
	if a, s := testenv.FenceWrites(reg, bucket+"/"+key, "accepted"), testenv.FenceWrites(reg, bucket+"/"+key, "stale"); a != 2 || s != 1 {
		t.Fatalf("fencedlease_fence_writes_total: accepted %v, stale %v; want 2 and 1", a, s)
	}

	t.Log("paused: a write fails (not as stale); resumed, the fence holds")
	srv.Pause()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = f.Put(short, key, 3, []byte("during the pause"), minio.PutObjectOptions{})
	cancel()
	srv.Resume()
	if err == nil || errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("a write to a paused server: %v, want a plain error", err)
	}

	t.Log("killed and restarted: the token is on disk")
	srv.Restart()
	connect(t, srv)
	if err := f.Put(ctx, key, 1, []byte("after the restart, from token 1"), minio.PutObjectOptions{}); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("token 1 after a restart: %v, want ErrStaleToken", err)
	}
	if body, token := current(t, f, key); body != "from token 2" || token != 2 {
		t.Fatalf("after the restart: %q from token %d", body, token)
	}
	if err := f.Put(ctx, key, 3, []byte("from token 3"), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("token 3 after the restart: %v", err)
	}
	if body, token := current(t, f, key); body != "from token 3" || token != 3 {
		t.Fatalf("after token 3: %q from token %d", body, token)
	}
}

// Why the fence CASes a pointer of its own and not the caller's object: the server's ETag
// is the body's MD5, so an If-Match taken before a newer holder rewrote the same bytes
// still matches (A-B-A) and the old holder's write lands. This pins the server behaviour
// the package doc describes; if a server made ETags unique per write, it would fail here.
func TestAnIfMatchOnTheSameBytesMatchesAfterARewrite(t *testing.T) {
	srv := testenv.StartS3(t, false)
	c := connect(t, srv)
	ctx := context.Background()
	put := func(body string, opts minio.PutObjectOptions) (minio.UploadInfo, error) {
		return c.PutObject(ctx, bucket, "status", strings.NewReader(body), int64(len(body)), opts)
	}
	first, err := put("idle", minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put("running", minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	var stale minio.PutObjectOptions
	stale.SetMatchETag(first.ETag)
	if _, err := put("late", stale); minio.ToErrorResponse(err).StatusCode != 412 {
		t.Fatalf("If-Match an old ETag: %v, want 412", err)
	}
	if _, err := put("idle", minio.PutObjectOptions{}); err != nil { // the newer holder, same bytes
		t.Fatal(err)
	}
	if _, err := put("late", stale); err != nil {
		t.Fatalf("If-Match the ETag of bytes written again: %v; the server tells versions apart, update the package doc", err)
	}
	var first2 minio.PutObjectOptions
	first2.SetMatchETagExcept("*")
	if _, err := put("again", first2); minio.ToErrorResponse(err).StatusCode != 412 {
		t.Fatalf("If-None-Match: * on an existing object: %v, want 412", err)
	}
}

// Racing writers through the fence: the stored token never goes down (a watcher reads
// it all along), every write whose token was already lower than the stored one when it
// began is refused, the last token stored is the highest offered, and one content object
// is left: the current one. Also on a server whose GET can return an old body with a new
// ETag (versitygw with a metadata sidecar): without the fence's MD5 check of each pointer
// read, the token went down in 3 runs of 3 there.
func TestS3FenceUnderRacingWriters(t *testing.T) {
	t.Run("consistent reads", func(t *testing.T) { racingWriters(t, testenv.StartS3(t, false)) })
	t.Run("torn reads", func(t *testing.T) { racingWriters(t, testenv.StartS3(t, true)) })
}

func racingWriters(t *testing.T, srv *testenv.S3) {
	c := connect(t, srv)
	f := &s3fence.Fence{Client: c, Bucket: bucket, Attempts: 1000}
	ctx := context.Background()
	const key = "manifest.json"
	var highestSeen atomic.Int64
	stop := make(chan struct{})
	watched := make(chan error, 1)
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
			}
			stored, err := f.Stored(ctx, key)
			if err != nil {
				watched <- err
				return
			}
			if prev := highestSeen.Load(); stored < prev {
				watched <- fmt.Errorf("stored token went down from %d to %d", prev, stored)
				return
			}
			highestSeen.Store(stored)
		}
	}()
	var wg sync.WaitGroup
	var accepted, refused atomic.Int64
	for w := range 6 {
		wg.Go(func() {
			for i := range 12 {
				token := int64(1 + i*5 + w) // rising, and overlapping between writers
				before := highestSeen.Load()
				err := f.Put(ctx, key, token, []byte(fmt.Sprintf("token %d", token)), minio.PutObjectOptions{})
				switch {
				case err == nil && token < before:
					t.Errorf("token %d accepted after %d was stored", token, before)
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, fence.ErrStaleToken):
					refused.Add(1)
				default:
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-watched; err != nil {
		t.Fatal(err)
	}
	body, token := current(t, f, key)
	if token != 61 || body != "token 61" {
		t.Fatalf("after the race: %q from token %d, want token 61's", body, token)
	}
	if got := contents(t, c, key); len(got) != 1 {
		t.Fatalf("content objects left: %v, want only the current one", got)
	}
	if accepted.Load() == 0 || refused.Load() == 0 {
		t.Fatalf("accepted %d, refused %d: the race did not exercise both", accepted.Load(), refused.Load())
	}
	t.Logf("accepted %d, refused %d", accepted.Load(), refused.Load())
}

// An object written without the fence is not taken for a pointer: the write says so.
func TestS3FenceRefusesAKeyWrittenWithoutIt(t *testing.T) {
	srv := testenv.StartS3(t, false)
	c := connect(t, srv)
	ctx := context.Background()
	if _, err := c.PutObject(ctx, bucket, "plain", bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	f := &s3fence.Fence{Client: c, Bucket: bucket}
	if err := f.Put(ctx, "plain", 1, []byte("y"), minio.PutObjectOptions{}); err == nil || !strings.Contains(err.Error(), "not a fenced object") {
		t.Fatalf("a write over an unfenced object: %v", err)
	}
}

// The shards of a FencedLease with slots are fenced per slot (fence.ForSlot): slot 0's
// holder still writes after slot 1's newer token did; an older holder of slot 0 is refused.
func TestS3FenceFencesEachSlotApart(t *testing.T) {
	srv := testenv.StartS3(t, false)
	f := &s3fence.Fence{Client: connect(t, srv), Bucket: bucket}
	for _, step := range []struct {
		slot  int32
		token int64
		stale bool
	}{{1, 5, false}, {0, 4, false}, {0, 6, false}, {0, 4, true}, {1, 5, false}} {
		err := f.Put(context.Background(), fence.ForSlot("daily/report.csv", step.slot), step.token, []byte("shard"), minio.PutObjectOptions{})
		if stale := errors.Is(err, fence.ErrStaleToken); stale != step.stale || err != nil && !stale {
			t.Fatalf("slot %d token %d: %v (stale wanted: %v)", step.slot, step.token, err, step.stale)
		}
	}
}
