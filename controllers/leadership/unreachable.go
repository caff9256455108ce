package leadership

import (
	"context"
	"errors"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Unreachable is true for errors of a server that did not answer, or answered that it
// cannot serve now: transport errors, timeouts, 503, 500, 429.
func Unreachable(err error) bool {
	var netErr net.Error
	return err != nil && (errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsInternalError(err) || apierrors.IsTooManyRequests(err))
}
