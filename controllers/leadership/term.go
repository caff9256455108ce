package leadership

import (
	"errors"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrTermEnded is returned for a write of a term that ended: a goroutine that outlived
// its candidacy.
var ErrTermEnded = errors.New("the leadership term this write belongs to has ended")

// Term is one candidacy's share of a Guard. Its writes go ahead only while the Guard is
// certain of leadership and the term has not ended. A process that campaigns again ends
// the last term before the next begins, so a straggler of an old term can never write
// again — not even once the same process leads again and the Guard is certain once more.
type Term struct {
	g     *Guard
	n     uint64
	ended atomic.Bool
}

// NewTerm begins term n of g.
func (g *Guard) NewTerm(n uint64) *Term { return &Term{g: g, n: n} }

// N is the term's number in this process.
func (t *Term) N() uint64 { return t.n }

// End refuses every later write of the term, for good.
func (t *Term) End() { t.ended.Store(true) }

// Err is nil while the term may write: not ended, and leadership certain.
func (t *Term) Err() error {
	if t.ended.Load() {
		return ErrTermEnded
	}
	return t.g.Err()
}

func (t *Term) refuse() error {
	if t.ended.Load() {
		t.g.refused.Inc()
		return ErrTermEnded
	}
	return t.g.refuse()
}

// Client returns c with every write refused once the term ended or while leadership is
// not certain.
func (t *Term) Client(c client.Client) client.Client { return &guardedClient{Client: c, g: t} }
