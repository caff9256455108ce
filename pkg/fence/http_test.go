package fence_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/fencedlease/fencedlease/pkg/fence"
)

func TestMiddleware(t *testing.T) {
	store := &fence.MemoryStore{}
	var served []int64
	h := fence.Middleware(store, func(r *http.Request) string { return strings.TrimPrefix(r.URL.Path, "/") },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			token, ok := fence.TokenFrom(r.Context())
			if !ok {
				t.Error("no token in the handler's context")
			}
			served = append(served, token)
			w.WriteHeader(http.StatusNoContent)
		}))
	base := listen(t, h)

	post := func(path, token string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, base+"/"+path, nil)
		if token != "" {
			req.Header.Set(fence.Header, token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body := map[string]any{}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	for _, step := range []struct {
		path, token string
		code        int
		message     string
	}{
		{"invoices", "81", http.StatusNoContent, ""},
		{"invoices", "82", http.StatusNoContent, ""},
		{"invoices", "82", http.StatusNoContent, ""},
		{"invoices", "81", http.StatusConflict, `stale fencing token for "invoices": offered 81, but 82 was already accepted`},
		{"payroll", "1", http.StatusNoContent, ""},
		{"invoices", "", http.StatusBadRequest, `header Fencing-Token must carry the fencing token (a positive integer), got ""`},
		{"invoices", "eighty", http.StatusBadRequest, `got "eighty"`},
		{"invoices", "0", http.StatusBadRequest, `got "0"`},
	} {
		code, body := post(step.path, step.token)
		if code != step.code {
			t.Fatalf("%s with %q: status %d, want %d (%v)", step.path, step.token, code, step.code, body)
		}
		if step.message != "" && !strings.Contains(fmt.Sprint(body["error"]), step.message) {
			t.Fatalf("%s with %q: error %q, want %q", step.path, step.token, body["error"], step.message)
		}
		if code == http.StatusConflict && (body["stored"] != float64(82) || body["offered"] != float64(81)) {
			t.Fatalf("conflict body %v", body)
		}
	}
	if fmt.Sprint(served) != "[81 82 82 1]" {
		t.Fatalf("handler ran for tokens %v", served)
	}
}

// A holder of a FencedLease with slots sends its slot: each slot's writes are fenced
// apart, so slot 0's holder (token 1) still writes after slot 1's (token 2) did, and
// only an older holder of the same slot is refused.
func TestMiddlewareFencesEachSlotApart(t *testing.T) {
	store := &fence.MemoryStore{}
	h := fence.Middleware(store, func(*http.Request) string { return "invoices" },
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	base := listen(t, h)
	post := func(slot, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, base+"/", nil)
		req.Header.Set(fence.Header, token)
		if slot != "-" {
			req.Header.Set(fence.SlotHeader, slot)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body := map[string]any{}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, fmt.Sprint(body["error"])
	}
	for _, step := range []struct {
		slot, token string
		code        int
		message     string
	}{
		{"1", "2", http.StatusNoContent, ""},
		{"0", "1", http.StatusNoContent, ""},
		{"0", "3", http.StatusNoContent, ""},
		{"0", "1", http.StatusConflict, `stale fencing token for "invoices/slot-0": offered 1, but 3 was already accepted`},
		{"1", "2", http.StatusNoContent, ""},
		{"-", "1", http.StatusNoContent, ""}, // without the header: the resource alone
		{"-", "2", http.StatusNoContent, ""},
		{"-", "1", http.StatusConflict, `stale fencing token for "invoices"`},
		{"one", "5", http.StatusBadRequest, `header Fencing-Slot must carry the slot the token was granted in (a whole number from 0), got "one"`},
		{"-1", "5", http.StatusBadRequest, `got "-1"`},
	} {
		code, msg := post(step.slot, step.token)
		if code != step.code || !strings.Contains(msg, step.message) {
			t.Fatalf("slot %s token %s: %d %q, want %d %q", step.slot, step.token, code, msg, step.code, step.message)
		}
	}
}
