// Package s3fence fences writes to S3-compatible object storage. A fenced object is a
// small pointer object the fence owns, holding the highest token accepted for it and the
// key of its current content; a write puts the content under a key of its own, then
// replaces the pointer with a conditional PUT (If-Match on the ETag it read, If-None-Match: *
// for the first), so of two writers racing, the one that read an older pointer loses with
// 412 Precondition Failed, reads again and, if its token is now older, gets
// fence.ErrStaleToken. A holder whose grant ended cannot make its content current after
// its successor's.
//
// Why a pointer and not the object itself: S3's ETag is the MD5 of the body, so a
// conditional PUT compares content, not versions. If a newer holder rewrote the same bytes
// an older one had read, the older one's If-Match would still match (A-B-A) and its late
// write would land. The pointer's body names its token and a fresh random key, so no two
// writes ever share an ETag.
//
// It is its own package so that importing pkg/fence does not link the S3 client.
package s3fence

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/fencedlease/fencedlease/pkg/fence"
)

// ContentInfix separates a fenced object's key from its contents' keys:
// key + ContentInfix + "<token>-<random>".
const ContentInfix = ".fenced/"

// Fence fences writes to one bucket.
type Fence struct {
	// Client reaches the storage; its credentials need GetObject, PutObject and
	// DeleteObject on the bucket.
	Client *minio.Client
	// Bucket holds the fenced objects.
	Bucket string
	// Metrics counts accepted and refused writes (fencedlease_fence_writes_total, resource
	// "bucket/key"); nil counts nothing.
	Metrics *fence.Metrics
	// Attempts bounds the retries when another writer replaced the pointer between its read
	// and the conditional PUT; default 16.
	Attempts int
	// OpaqueETags skips the check that a pointer's ETag is the MD5 of the body read with it.
	// Leave it false unless the bucket encrypts with SSE-KMS or SSE-C, whose ETags are not
	// MD5s: the server must then return each body with the ETag of the same write.
	OpaqueETags bool
}

// pointer is the body of a fenced object.
type pointer struct {
	Token   int64  `json:"token"`
	Content string `json:"content"`
}

// ErrContended is returned when other writers kept replacing the pointer for all of
// Attempts: the content written was removed again; try again.
var ErrContended = errors.New("s3fence: the pointer changed under every attempt")

// ErrNotFound is returned by Get for a key never written through the fence.
var ErrNotFound = errors.New("s3fence: no fenced object")

// Put makes body the current content of key if token is not older than the highest token
// accepted for key, and records token as that highest; else it changes nothing and returns
// a *fence.StaleTokenError (errors.Is(err, fence.ErrStaleToken)). An equal token is
// accepted (a retry within one grant). The content it replaced is deleted.
func (f *Fence) Put(ctx context.Context, key string, token int64, body []byte, opts minio.PutObjectOptions) error {
	if token < 1 {
		return fmt.Errorf("s3fence: token %d is not a granted token", token)
	}
	resource := f.Bucket + "/" + key
	current, etag, err := f.read(ctx, key)
	if err != nil {
		return err
	}
	if current.Token > token { // refused before any content is written
		f.Metrics.Count(resource, false)
		return &fence.StaleTokenError{Resource: resource, Offered: token, Stored: current.Token}
	}
	content, err := contentKey(key, token)
	if err != nil {
		return err
	}
	opts.DisableMultipart = true // a part upload would leave parts behind on a refusal
	if _, err := f.Client.PutObject(ctx, f.Bucket, content, bytes.NewReader(body), int64(len(body)), opts); err != nil {
		return fmt.Errorf("s3fence: writing the content: %w", err)
	}
	next, err := json.Marshal(pointer{Token: token, Content: content})
	if err != nil {
		return err
	}
	attempts := f.Attempts
	if attempts <= 0 {
		attempts = 16
	}
	for range attempts {
		if current.Token > token {
			f.remove(content)
			f.Metrics.Count(resource, false)
			return &fence.StaleTokenError{Resource: resource, Offered: token, Stored: current.Token}
		}
		cond := minio.PutObjectOptions{ContentType: "application/json", DisableMultipart: true}
		if etag == "" {
			cond.SetMatchETagExcept("*") // If-None-Match: *, the first write
		} else {
			cond.SetMatchETag(etag)
		}
		_, err := f.Client.PutObject(ctx, f.Bucket, key, bytes.NewReader(next), int64(len(next)), cond)
		switch {
		case err == nil:
			f.Metrics.Count(resource, true)
			if current.Content != "" && current.Content != content {
				f.remove(current.Content)
			}
			return nil
		case lostRace(err):
			if current, etag, err = f.read(ctx, key); err != nil {
				f.remove(content)
				return err
			}
		default:
			// The PUT may have landed: the content stays, as the pointer may name it.
			return fmt.Errorf("s3fence: replacing the pointer: %w", err)
		}
	}
	f.remove(content)
	return ErrContended
}

// Get returns the current content of key and the token that wrote it; ErrNotFound when
// nothing was written through the fence.
func (f *Fence) Get(ctx context.Context, key string) ([]byte, int64, error) {
	for range 16 {
		current, _, err := f.read(ctx, key)
		if err != nil {
			return nil, 0, err
		}
		if current.Token == 0 {
			return nil, 0, ErrNotFound
		}
		obj, err := f.Client.GetObject(ctx, f.Bucket, current.Content, minio.GetObjectOptions{})
		if err != nil {
			return nil, 0, err
		}
		body, err := io.ReadAll(obj)
		_ = obj.Close()
		if notFound(err) {
			continue // replaced (and its content deleted) since the pointer was read
		}
		if err != nil {
			return nil, 0, err
		}
		return body, current.Token, nil
	}
	return nil, 0, ErrContended
}

// Stored is the highest token accepted for key; 0 when none was.
func (f *Fence) Stored(ctx context.Context, key string) (int64, error) {
	current, _, err := f.read(ctx, key)
	return current.Token, err
}

// ErrTornRead is returned when the server kept answering a pointer's GET with a body whose
// MD5 is not the ETag beside it: an old body with a new ETag would have the fence judge the
// old token and win the conditional PUT against the new one, so it does not go on.
var ErrTornRead = errors.New("s3fence: the pointer's ETag is not the MD5 of its body (a server pairing a body with another write's ETag, or SSE-KMS/SSE-C: see Fence.OpaqueETags)")

// read returns the pointer of key and its ETag; a zero pointer and "" when there is none.
// Each body is checked against its ETag (unless OpaqueETags): a server that returns a
// body with another write's ETag is read again.
func (f *Fence) read(ctx context.Context, key string) (pointer, string, error) {
	for range 16 {
		raw, etag, err := f.readOnce(ctx, key)
		if err != nil || etag == "" {
			return pointer{}, "", err
		}
		if sum := md5.Sum(raw); !f.OpaqueETags && hex.EncodeToString(sum[:]) != strings.ToLower(strings.Trim(etag, `"`)) {
			continue
		}
		var p pointer
		if err := json.Unmarshal(raw, &p); err != nil || p.Token < 1 || p.Content == "" {
			return pointer{}, "", fmt.Errorf("s3fence: %s/%s is not a fenced object's pointer (written without the fence?)", f.Bucket, key)
		}
		return p, etag, nil
	}
	return pointer{}, "", ErrTornRead
}

// readOnce is one GET of the pointer: its body and ETag; nil and "" when there is none.
func (f *Fence) readOnce(ctx context.Context, key string) ([]byte, string, error) {
	obj, err := f.Client.GetObject(ctx, f.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("s3fence: reading the pointer: %w", err)
	}
	defer func() { _ = obj.Close() }()
	raw, err := io.ReadAll(obj)
	if notFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("s3fence: reading the pointer: %w", err)
	}
	info, err := obj.Stat()
	if err != nil {
		return nil, "", fmt.Errorf("s3fence: reading the pointer: %w", err)
	}
	return raw, info.ETag, nil
}

// remove deletes a content object no pointer names, as well as it can: what it leaves is
// garbage, never a current content.
func (f *Fence) remove(content string) {
	_ = f.Client.RemoveObject(context.Background(), f.Bucket, content, minio.RemoveObjectOptions{})
}

func contentKey(key string, token int64) (string, error) {
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s%s%019d-%s", key, ContentInfix, token, hex.EncodeToString(nonce[:])), nil
}

// lostRace is a conditional PUT refused because the pointer changed since it was read:
// 412, or 409 ConditionalRequestConflict when another conditional PUT was in flight.
func lostRace(err error) bool {
	code := minio.ToErrorResponse(err).StatusCode
	return code == http.StatusPreconditionFailed || code == http.StatusConflict
}

func notFound(err error) bool {
	if err == nil {
		return false
	}
	resp := minio.ToErrorResponse(err)
	return resp.StatusCode == http.StatusNotFound || resp.Code == "NoSuchKey"
}
