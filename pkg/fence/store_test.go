package fence_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fencedlease/fencedlease/pkg/fence"
)

// effects records the order in which handlers' effects landed.
type effects struct {
	mu     sync.Mutex
	tokens []int64
}

func (e *effects) land(token int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tokens = append(e.tokens, token)
}

// inOrder fails if an effect of an older token landed after one of a newer token.
func (e *effects) inOrder(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := 1; i < len(e.tokens); i++ {
		if e.tokens[i] < e.tokens[i-1] {
			t.Fatalf("token %d's effect landed after token %d's: %v", e.tokens[i], e.tokens[i-1], e.tokens)
		}
	}
}

// serve runs Middleware in front of a handler that takes hold to produce its effect.
func serve(t *testing.T, store fence.Store, hold func(token int64), fx *effects) string {
	t.Helper()
	h := fence.Middleware(store, func(*http.Request) string { return "invoices" },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			token, _ := fence.TokenFrom(r.Context())
			hold(token)
			fx.land(token)
			w.WriteHeader(http.StatusNoContent)
		}))
	return listen(t, h) + "/"
}

// listen serves h on a loopback port until the test ends, and returns its base URL.
func listen(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

func send(t *testing.T, url string, token int64) int {
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	req.Header.Set(fence.Header, strconv.FormatInt(token, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A slow handler admitted with token 1 still running when token 2 arrives: token 2 waits
// for it, so token 1's effect can never land after token 2's.
func TestMiddlewareHoldsTheResourceAcrossTheHandler(t *testing.T) {
	fx := &effects{}
	inside := make(chan int64, 2)
	release := make(chan struct{})
	url := serve(t, &fence.MemoryStore{}, func(token int64) {
		inside <- token
		if token == 1 {
			<-release // a slow write: a GC pause, a slow disk
		}
	}, fx)

	codes := make(chan int, 2)
	go func() { codes <- send(t, url, 1) }()
	if got := <-inside; got != 1 {
		t.Fatalf("first in: token %d", got)
	}
	go func() { codes <- send(t, url, 2) }()
	select {
	case got := <-inside:
		t.Fatalf("token %d's handler ran while token 1's was still running", got)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if a, b := <-codes, <-codes; a != http.StatusNoContent || b != http.StatusNoContent {
		t.Fatalf("codes %d %d", a, b)
	}
	fx.inOrder(t)
	if len(fx.tokens) != 2 {
		t.Fatalf("effects %v", fx.tokens)
	}
}

// A newer token running slowly: an older one that arrives meanwhile waits, then is
// refused as stale, and its handler never runs.
func TestMiddlewareRefusesAnOlderTokenThatWaited(t *testing.T) {
	fx := &effects{}
	inside := make(chan int64, 2)
	release := make(chan struct{})
	url := serve(t, &fence.MemoryStore{}, func(token int64) {
		inside <- token
		<-release
	}, fx)
	codes := make(chan int, 1)
	go func() { codes <- send(t, url, 2) }()
	<-inside
	stale := make(chan int, 1)
	go func() { stale <- send(t, url, 1) }()
	time.Sleep(100 * time.Millisecond) // let token 1 queue behind token 2 (both outcomes are checked below)
	close(release)
	if c := <-codes; c != http.StatusNoContent {
		t.Fatalf("token 2: %d", c)
	}
	if c := <-stale; c != http.StatusConflict {
		t.Fatalf("token 1 after token 2: %d, want 409", c)
	}
	if len(fx.tokens) != 1 || fx.tokens[0] != 2 {
		t.Fatalf("effects %v, want only token 2's", fx.tokens)
	}
}

// Waves of concurrent requests with overlapping tokens (each wave's range starts above
// the last one's start) and handlers of random length: the effects land in
// non-decreasing token order, and every request is either served or refused as stale.
func TestMiddlewareConcurrentEffectsNeverGoBack(t *testing.T) {
	fx := &effects{}
	url := serve(t, &fence.MemoryStore{}, func(int64) {
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
	}, fx)
	var mu sync.Mutex
	served, refused := 0, 0
	const waves, perWave = 20, 10
	for wave := 0; wave < waves; wave++ {
		var wg sync.WaitGroup
		for i := 0; i < perWave; i++ {
			wg.Add(1)
			go func(token int64) {
				defer wg.Done()
				switch c := send(t, url, token); c {
				case http.StatusNoContent:
					mu.Lock()
					served++
					mu.Unlock()
				case http.StatusConflict:
					mu.Lock()
					refused++
					mu.Unlock()
				default:
					t.Errorf("token %d: %d", token, c)
				}
			}(int64(1 + 3*wave + rand.IntN(6)))
		}
		wg.Wait()
	}
	fx.inOrder(t)
	if served != len(fx.tokens) || served+refused != waves*perWave || served < waves {
		t.Fatalf("served %d, refused %d, effects %d", served, refused, len(fx.tokens))
	}
	t.Logf("served %d, refused as stale %d", served, refused)
}

// A Do waiting for the resource gives up with its context, and never runs fn.
func TestMemoryStoreDoGivesUpWithItsContext(t *testing.T) {
	s := &fence.MemoryStore{}
	entered := make(chan struct{})
	release := make(chan struct{})
	go func() {
		_ = s.Do(context.Background(), "r", 1, func(context.Context) error { close(entered); <-release; return nil })
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	ran := false
	err := s.Do(ctx, "r", 2, func(context.Context) error { ran = true; return nil })
	if !errors.Is(err, context.DeadlineExceeded) || ran {
		t.Fatalf("err %v, ran %v", err, ran)
	}
	close(release)
	// Token 2 gave up before it was admitted: it raised nothing.
	if err := s.Do(context.Background(), "r", 1, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("token 1 again: %v, want accepted", err)
	}
}
