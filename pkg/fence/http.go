package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Header carries the fencing token on a request.
const Header = "Fencing-Token"

// Middleware serves a request only if its Fencing-Token header is at least the highest
// token store admitted for the request's resource, and runs the handler inside
// store.Do: while it runs, no other request for that resource is admitted, so the check
// and the handler's effect are one step. It answers 400 for a missing or malformed token,
// 409 for a stale one and 503 when the request gave up waiting for its turn, as JSON.
// The handler finds the token with TokenFrom (to pass it on, e.g. to SQL.Accept inside
// its own transaction when the state lives in a database). A request with a
// Fencing-Slot header (a holder of a FencedLease with slots) is fenced per slot: under
// ForSlot(resource, slot); a malformed one gets 400.
func Middleware(store Store, resource func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw := r.Header.Get(Header)
		token, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || token < 1 {
			reply(w, http.StatusBadRequest, fmt.Sprintf("header %s must carry the fencing token (a positive integer), got %q", Header, raw), nil)
			return
		}
		res := resource(r)
		if raw, ok := r.Header[SlotHeader]; ok {
			slot, err := strconv.ParseInt(raw[0], 10, 32)
			if err != nil || slot < 0 || len(raw) > 1 {
				reply(w, http.StatusBadRequest, fmt.Sprintf("header %s must carry the slot the token was granted in (a whole number from 0), got %q", SlotHeader, strings.Join(raw, ", ")), nil)
				return
			}
			res = ForSlot(res, int32(slot))
		}
		err = store.Do(r.Context(), res, token, func(ctx context.Context) error {
			next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, tokenKey{}, token)))
			return nil
		})
		var stale *StaleTokenError
		switch {
		case errors.As(err, &stale):
			reply(w, http.StatusConflict, stale.Error(), stale)
		case err != nil:
			reply(w, http.StatusServiceUnavailable, "waiting for the resource: "+err.Error(), nil)
		}
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
