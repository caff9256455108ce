package fence

import (
	"context"
	"sync"
)

// Store admits work on a resource by fencing token, and runs it under the same check.
type Store interface {
	// Do runs fn as the holder of token for resource: only if token is at least the
	// highest token admitted for resource so far, and with no other Do for resource
	// running until fn returns. So work admitted with an older token can never land
	// after work admitted with a newer one: the check and the effect are one step. An
	// older token gets a *StaleTokenError and fn does not run. An admitted token is
	// recorded whatever fn returns (a failed attempt still ends the older generations).
	// A Do that waits for the resource gives up when ctx ends, with ctx's error.
	Do(ctx context.Context, resource string, token int64, fn func(context.Context) error) error
}

// MemoryStore is a Store for a service whose protected state lives in its own process.
// fn must finish its effect before it returns: work it leaves running in the background
// is not covered.
type MemoryStore struct {
	Metrics *Metrics

	mu        sync.Mutex
	resources map[string]*resourceSlot
}

// resourceSlot is one resource's highest token and its turn to run; users counts the Do
// calls holding or waiting for it, so an idle slot can be dropped.
type resourceSlot struct {
	turn    chan struct{}
	highest int64
	users   int
}

// Do implements Store.
func (s *MemoryStore) Do(ctx context.Context, resource string, token int64, fn func(context.Context) error) error {
	slot := s.enter(resource)
	defer s.leave(resource, slot)
	select {
	case slot.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-slot.turn }()
	// highest is only touched while holding the turn.
	if token < slot.highest {
		s.Metrics.Count(resource, false)
		return &StaleTokenError{Resource: resource, Offered: token, Stored: slot.highest}
	}
	slot.highest = token
	s.Metrics.Count(resource, true)
	return fn(ctx)
}

func (s *MemoryStore) enter(resource string) *resourceSlot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resources == nil {
		s.resources = map[string]*resourceSlot{}
	}
	slot := s.resources[resource]
	if slot == nil {
		slot = &resourceSlot{turn: make(chan struct{}, 1)}
		s.resources[resource] = slot
	}
	slot.users++
	return slot
}

// leave keeps the slot while it has users or remembers a token: the highest token must
// outlive every request, or an older token would be admitted again.
func (s *MemoryStore) leave(resource string, slot *resourceSlot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot.users--
	if slot.users == 0 && slot.highest == 0 {
		delete(s.resources, resource)
	}
}
