package fence

import (
	"context"
	"regexp"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// UpdateStatus writes obj's status as the holder of token. A status write carries no
// token of its own (the API server drops metadata changes from the status writes of
// custom resources and of most built-in kinds), so UpdateStatus first stamps obj through
// the fenced object itself, where an older token is refused, and then writes the status
// with the resourceVersion that stamp returned. A write by anyone in between (a newer
// generation's stamp above all) makes the status write fail with a Conflict: re-read and
// try again, and a stale holder's next stamp is refused. setStatus sets the status on obj
// as the stamp returned it. An older token gets a *StaleTokenError.
func UpdateStatus(ctx context.Context, c client.Client, obj client.Object, token int64, setStatus func()) error {
	Stamp(obj, token)
	if err := c.Update(ctx, obj); err != nil {
		return objectFenceError(err, obj, token)
	}
	setStatus()
	return c.Status().Update(ctx, obj)
}

// storedIn finds the stored token in the object fence policy's refusal message.
var storedIn = regexp.MustCompile(`^stale fencing token \d+: this object was already written with token (\d+)`)

// objectFenceError turns the object fence's refusal into a *StaleTokenError.
func objectFenceError(err error, obj client.Object, token int64) error {
	status, ok := err.(apierrors.APIStatus)
	if !ok || !(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)) {
		return err
	}
	msg := status.Status().Message
	// The API server prefixes the policy's message with which policy denied it.
	for i := range msg {
		if m := storedIn.FindStringSubmatch(msg[i:]); m != nil {
			stored, _ := strconv.ParseInt(m[1], 10, 64)
			return &StaleTokenError{Resource: obj.GetNamespace() + "/" + obj.GetName(), Offered: token, Stored: stored}
		}
	}
	return err
}
