package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
)

// Header carries the fencing token on a request.
const Header = "Fencing-Token"

// Store checks and records tokens for a service. Accept returns a *StaleTokenError for
// a token older than the highest accepted for resource.
type Store interface {
	Accept(ctx context.Context, resource string, token int64) error
}

// MemoryStore is a Store for a service whose protected state lives in its own process.
type MemoryStore struct {
	mu      sync.Mutex
	highest map[string]int64
	Metrics *Metrics
}

// Accept implements Store.
func (s *MemoryStore) Accept(_ context.Context, resource string, token int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.highest == nil {
		s.highest = map[string]int64{}
	}
	if stored := s.highest[resource]; token < stored {
		s.Metrics.count(resource, false)
		return &StaleTokenError{Resource: resource, Offered: token, Stored: stored}
	}
	s.highest[resource] = token
	s.Metrics.count(resource, true)
	return nil
}

// Middleware admits a request only if its Fencing-Token header is at least the highest
// token store accepted for the request's resource; it answers 400 for a missing or
// malformed token and 409 for a stale one, as JSON. The handler finds the token with
// TokenFrom, to pass it on (e.g. to SQL.Accept inside its own transaction).
func Middleware(store Store, resource func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw := r.Header.Get(Header)
		token, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || token < 1 {
			reply(w, http.StatusBadRequest, fmt.Sprintf("header %s must carry the fencing token (a positive integer), got %q", Header, raw), nil)
			return
		}
		res := resource(r)
		var stale *StaleTokenError
		switch err := store.Accept(r.Context(), res, token); {
		case errors.As(err, &stale):
			reply(w, http.StatusConflict, stale.Error(), stale)
			return
		case err != nil:
			reply(w, http.StatusInternalServerError, "checking the fencing token: "+err.Error(), nil)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, token)))
	})
}

type tokenKey struct{}

// TokenFrom is the token Middleware admitted the request with.
func TokenFrom(ctx context.Context) (int64, bool) {
	t, ok := ctx.Value(tokenKey{}).(int64)
	return t, ok
}

func reply(w http.ResponseWriter, code int, msg string, stale *StaleTokenError) {
	body := map[string]any{"error": msg}
	if stale != nil {
		body["resource"], body["offered"], body["stored"] = stale.Resource, stale.Offered, stale.Stored
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
