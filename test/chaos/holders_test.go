package chaos

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/pkg/fence"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

// ledger is the protected resource: a SQL table (SQLite or PostgreSQL) written only
// through the fence — for a FencedLease with slots, each slot's rows fenced apart
// (fence.ForSlot).
type ledger struct {
	db    *sql.DB
	fence fence.SQL
	// table is the ledger's table and the fenced resource; sharded fences it per slot.
	table   string
	sharded bool
}

func (l *ledger) create(ctx context.Context) error {
	if err := l.fence.CreateTable(ctx, l.db); err != nil {
		return err
	}
	id := "INTEGER PRIMARY KEY AUTOINCREMENT"
	if l.fence.Dialect == fence.Postgres {
		id = "BIGSERIAL PRIMARY KEY"
	}
	_, err := l.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+l.table+` (id `+id+`, token BIGINT NOT NULL, pod TEXT NOT NULL, slot INTEGER NOT NULL)`)
	return err
}

// write records one entry for pod under token (in slot), or is refused as stale.
func (l *ledger) write(ctx context.Context, pod string, token int64, slot int32, zombie bool) (Write, error) {
	w := Write{Pod: pod, Token: token, Zombie: zombie, Slot: slot}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return w, err
	}
	defer func() { _ = tx.Rollback() }()
	resource := l.table
	if l.sharded {
		resource = fence.ForSlot(l.table, slot)
	}
	if err := l.fence.Accept(ctx, tx, resource, token); err != nil {
		if errors.Is(err, fence.ErrStaleToken) {
			return w, nil
		}
		return w, err
	}
	insert := `INSERT INTO ` + l.table + ` (token, pod, slot) VALUES (?1, ?2, ?3) RETURNING id`
	if l.fence.Dialect == fence.Postgres {
		insert = `INSERT INTO ` + l.table + ` (token, pod, slot) VALUES ($1, $2, $3) RETURNING id`
	}
	if err := tx.QueryRowContext(ctx, insert, token, pod, slot).Scan(&w.Row); err != nil {
		return w, err
	}
	if err := tx.Commit(); err != nil {
		return w, err
	}
	w.Accepted = true
	return w, nil
}

func (l *ledger) rows(ctx context.Context) ([]Row, error) {
	rs, err := l.db.QueryContext(ctx, `SELECT id, token, slot FROM `+l.table+` ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []Row
	for rs.Next() {
		var r Row
		if err := rs.Scan(&r.ID, &r.Token, &r.Slot); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rs.Err()
}

// holders plays the workload: for every grant, a pkg/holder Holder that writes to the
// ledger for a while and releases. One holder in zombieEvery, at random (a fixed cadence
// would meet the faults' own cadence), is a zombie instead: it
// loses its link to the API server and goes on writing, ignoring its context, for three
// leases.
type holders struct {
	cfg         *rest.Config
	c           client.Client
	ns, lease   string
	sharded     bool // the FencedLease has slots: a holder per slot
	leaseLength time.Duration
	ledger      *ledger
	zombieEvery int64

	mu      sync.Mutex
	started map[int64]bool
	lives   []Life
	writes  []Write
	errs    []error
	wg      sync.WaitGroup
}

func (hs *holders) run(ctx context.Context) {
	for ctx.Err() == nil {
		for _, g := range hs.granted(ctx) {
			hs.mu.Lock()
			if !hs.started[g.token] {
				hs.started[g.token] = true
				hs.wg.Add(1)
				go hs.hold(ctx, g, hs.zombieEvery > 0 && rand.Int64N(hs.zombieEvery) == 0)
			}
			hs.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	hs.wg.Wait()
}

// grant is one a holder starts on.
type grant struct {
	pod   string
	token int64
	slot  int32
}

// granted finds the pods the grants were finished for: the status names each, and the pod
// carries the token and lost its scheduling gate — the moment a real pod could start.
func (hs *holders) granted(ctx context.Context) []grant {
	fl := &fencingv1.FencedLease{}
	if hs.c.Get(ctx, client.ObjectKey{Namespace: hs.ns, Name: hs.lease}, fl) != nil {
		return nil
	}
	named := map[int32]*fencingv1.Holder{}
	if fl.Status.Holder != nil {
		named[0] = fl.Status.Holder
	}
	for _, s := range fl.Status.Slots {
		if s.Holder != nil {
			named[s.Slot] = s.Holder
		}
	}
	var out []grant
	for slot, g := range named {
		p := &corev1.Pod{}
		if hs.c.Get(ctx, client.ObjectKey{Namespace: hs.ns, Name: g.PodName}, p) != nil || p.UID != g.PodUID ||
			p.Annotations[fencingv1.TokenAnnotation] != strconv.FormatInt(g.Token, 10) || len(p.Spec.SchedulingGates) > 0 {
			continue
		}
		out = append(out, grant{g.PodName, g.Token, slot})
	}
	return out
}

// cuttable is a holder's link to the API server.
type cuttable struct {
	cut atomic.Bool
	rt  http.RoundTripper
}

func (c *cuttable) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("cut off from the API server")
	}
	return c.rt.RoundTrip(r)
}

func (hs *holders) hold(ctx context.Context, g grant, zombie bool) {
	defer hs.wg.Done()
	pod, token := g.pod, g.token
	link := &cuttable{}
	cfg := rest.CopyConfig(hs.cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { link.rt = rt; return link }
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		hs.fail(err)
		return
	}
	h, err := holder.Start(ctx, holder.Config{Leases: holder.ClientGo(cs.CoordinationV1()), Namespace: hs.ns, LeaseName: hs.lease, Identity: pod, Token: token,
		Sharded: hs.sharded, Slot: g.slot})
	if err != nil {
		return // revoked, or the API server was away: never confirmed, never worked
	}
	life := Life{Pod: pod, Token: token, Confirmed: time.Now(), Slot: g.slot}
	if zombie {
		link.cut.Store(true)
		for end := time.Now().Add(3 * hs.leaseLength); time.Now().Before(end) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
			hs.write(ctx, g, true) // ignores its lost grant: only the test's end stops it
		}
		return
	}
	for end := time.Now().Add(600 * time.Millisecond); h.Context().Err() == nil && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		hs.write(h.Context(), g, false)
	}
	if h.Context().Err() == nil {
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = h.Release(rctx) // may fail in an outage: the grant then expires
		cancel()
	}
	<-h.Context().Done()
	life.Ended = time.Now()
	hs.mu.Lock()
	hs.lives = append(hs.lives, life)
	hs.mu.Unlock()
}

// write decides by ctx whether to start a write; once started, the write runs to its
// end (a cancelled commit could have landed unseen), and the fence judges it.
func (hs *holders) write(ctx context.Context, g grant, zombie bool) {
	if ctx.Err() != nil {
		return
	}
	w, err := hs.ledger.write(context.Background(), g.pod, g.token, g.slot, zombie)
	if err != nil {
		hs.fail(err)
		return
	}
	hs.mu.Lock()
	hs.writes = append(hs.writes, w)
	hs.mu.Unlock()
}

func (hs *holders) fail(err error) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.errs = append(hs.errs, err)
}

func (hs *holders) into(h *History) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	h.Holders = append(h.Holders, hs.lives...)
	h.Writes = append(h.Writes, hs.writes...)
}
