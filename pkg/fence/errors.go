package fence

import (
	"errors"
	"fmt"
)

// ErrStaleToken matches every *StaleTokenError.
var ErrStaleToken = errors.New("stale fencing token")

// StaleTokenError is a write refused because a newer token was already accepted.
type StaleTokenError struct {
	Resource string
	Offered  int64
	Stored   int64
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("stale fencing token for %q: offered %d, but %d was already accepted", e.Resource, e.Offered, e.Stored)
}

// Is makes errors.Is(err, ErrStaleToken) true.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }
