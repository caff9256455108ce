// Package kafkafence fences what a holder produces to Kafka. The producers of one fenced
// resource share one transactional ID, so the broker's producer epoch fences a producer
// once another has started; and every transaction carries the producer's token, in a
// record on a one-partition fence topic and in a header of each of its records, and is
// committed only if no higher token was ever written to the fence topic before it. So a
// holder whose grant ended cannot commit records after its successor's — neither the
// paused producer it still has (the epoch refuses it) nor a new one it starts (its token
// is refused) — and read-committed consumers see the transactions in token order.
//
// It is its own package so that importing pkg/fence does not link the Kafka client.
package kafkafence

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencedlease/fencedlease/pkg/fence"
)

// DefaultFenceTopic is where the tokens are written: one partition, keyed by resource.
const DefaultFenceTopic = "fencedlease-tokens"

// TokenHeader is the header every record produced through the fence carries: the token,
// in decimal, for consumers that check it themselves.
const TokenHeader = "fencing-token"

// TransactionalID is the transactional ID every producer of resource uses: what makes the
// broker fence the older of two producers of it.
func TransactionalID(resource string) string { return "fencedlease/" + resource }

// Config says what a Producer produces for.
type Config struct {
	// Resource names what is fenced; the FencedLease's "namespace/name" is the usual choice.
	Resource string
	// Token is the holder's fencing token (FENCING_TOKEN).
	Token int64
	// FenceTopic defaults to DefaultFenceTopic. It is created, compacted, with one
	// partition if it does not exist; one that has more partitions is refused.
	FenceTopic string
	// Metrics counts accepted and refused transactions (fencedlease_fence_writes_total);
	// nil counts nothing.
	Metrics *fence.Metrics
	// Attempts bounds how often a transaction is tried again after the producer was fenced
	// by another producer of the resource whose token was not higher; default 8.
	Attempts int
}

// Producer produces records for one resource, at one token, one transaction at a time.
type Producer struct {
	cfg  Config
	opts []kgo.Opt

	mu       sync.Mutex
	producer *kgo.Client // transactional; replaced after it was fenced
	reader   *kgo.Client // reads the fence topic, read-uncommitted, from offset 0 on
	highest  int64       // the highest token the reader has seen for the resource
	read     int64       // the reader has seen every fence record below this offset
}

// NewProducer connects, with opts (the seed brokers, TLS, SASL...; not a transactional ID,
// which the fence sets), and makes the fence topic if it is missing.
func NewProducer(ctx context.Context, cfg Config, opts ...kgo.Opt) (*Producer, error) {
	if cfg.Token < 1 {
		return nil, fmt.Errorf("kafkafence: token %d is not a granted token", cfg.Token)
	}
	if cfg.Resource == "" {
		return nil, errors.New("kafkafence: no resource")
	}
	if cfg.FenceTopic == "" {
		cfg.FenceTopic = DefaultFenceTopic
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 8
	}
	p := &Producer{cfg: cfg, opts: opts}
	reader, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.FenceTopic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()))...)
	if err != nil {
		return nil, fmt.Errorf("kafkafence: %w", err)
	}
	p.reader = reader
	if err := p.ensureFenceTopic(ctx); err != nil {
		reader.Close()
		return nil, err
	}
	return p, nil
}

func (p *Producer) ensureFenceTopic(ctx context.Context) error {
	admin := kadm.NewClient(p.reader)
	topics, err := admin.ListTopics(ctx, p.cfg.FenceTopic)
	if err != nil {
		return fmt.Errorf("kafkafence: looking up the fence topic: %w", err)
	}
	if detail, ok := topics[p.cfg.FenceTopic]; ok && detail.Err == nil {
		if n := len(detail.Partitions); n != 1 {
			return fmt.Errorf("kafkafence: the fence topic %s has %d partitions; it needs exactly one, so that every token of a resource is in one log", p.cfg.FenceTopic, n)
		}
		return nil
	}
	compact := "compact"
	_, err = admin.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": &compact}, p.cfg.FenceTopic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kafkafence: making the fence topic: %w", err)
	}
	return nil
}

// Produce produces records in one transaction: all of them are committed, each with the
// TokenHeader, or none is. It returns a *fence.StaleTokenError (errors.Is(err,
// fence.ErrStaleToken)) when a higher token was written to the fence topic first; records
// are then not committed, and the Producer is of no more use: Close it.
func (p *Producer) Produce(ctx context.Context, records ...*kgo.Record) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	token := []byte(strconv.FormatInt(p.cfg.Token, 10))
	for _, r := range records {
		if r.Topic == p.cfg.FenceTopic {
			return fmt.Errorf("kafkafence: a record for the fence topic %s: only the fence writes there", r.Topic)
		}
	}
	for _, r := range records {
		r.Headers = slices.DeleteFunc(r.Headers, func(h kgo.RecordHeader) bool { return h.Key == TokenHeader })
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: TokenHeader, Value: token})
	}
	var err error
	for attempt := 1; attempt <= p.cfg.Attempts; attempt++ {
		err = p.transaction(ctx, records)
		if err != nil && p.producer != nil {
			// After a failed transaction the producer's state is not known: start another.
			p.producer.Close()
			p.producer = nil
		}
		if !replaced(err) || ctx.Err() != nil {
			break
		}
		// Another producer of the resource started after this one. If its token was higher,
		// the next attempt says so before it starts a producer; if not, the next attempt's
		// producer fences that one. The pause lets the other write its token first, so two
		// producers do not keep replacing each other.
		select {
		case <-time.After(time.Duration(25+rand.IntN(75*attempt)) * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var stale *fence.StaleTokenError
	switch {
	case errors.As(err, &stale):
		p.cfg.Metrics.Count(p.cfg.Resource, false)
	case err == nil:
		p.cfg.Metrics.Count(p.cfg.Resource, true)
	}
	return err
}

func (p *Producer) transaction(ctx context.Context, records []*kgo.Record) error {
	if p.producer == nil {
		// Refuse before starting a producer when a higher token is already known: starting one
		// fences the current holder's producer (which then starts another, and wins).
		if err := p.readToEnd(ctx); err != nil {
			return err
		}
		if p.highest > p.cfg.Token {
			return &fence.StaleTokenError{Resource: p.cfg.Resource, Offered: p.cfg.Token, Stored: p.highest}
		}
		cl, err := kgo.NewClient(append(append([]kgo.Opt{}, p.opts...), kgo.TransactionalID(TransactionalID(p.cfg.Resource)))...)
		if err != nil {
			return fmt.Errorf("kafkafence: %w", err)
		}
		p.producer = cl
	}
	if err := p.producer.BeginTransaction(); err != nil {
		return fmt.Errorf("kafkafence: %w", err)
	}
	// The fence record first: its produce makes the producer current (InitProducerID, at
	// the first transaction) and gives an offset below which every record is known.
	mark := &kgo.Record{Topic: p.cfg.FenceTopic, Key: []byte(p.cfg.Resource), Value: []byte(strconv.FormatInt(p.cfg.Token, 10))}
	if err := p.producer.ProduceSync(ctx, mark).FirstErr(); err != nil {
		return p.abort(ctx, err)
	}
	if err := p.readBelow(ctx, mark.Offset); err != nil {
		return p.abort(ctx, err)
	}
	if p.highest > p.cfg.Token {
		return p.abort(ctx, &fence.StaleTokenError{Resource: p.cfg.Resource, Offered: p.cfg.Token, Stored: p.highest})
	}
	if err := p.producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return p.abort(ctx, err)
	}
	// A producer of the resource that started since the fence record was written makes
	// this commit fail: its transaction, not this one, comes after.
	if err := p.producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return p.abort(ctx, err)
	}
	return nil
}

// readToEnd reads the fence topic up to a probe record it produces there (not in a
// transaction, with a key no resource has): the end is then known even when the last
// records are transaction markers, which a reader is never given.
func (p *Producer) readToEnd(ctx context.Context) error {
	probe := &kgo.Record{Topic: p.cfg.FenceTopic, Key: []byte(probeKey)}
	if err := p.reader.ProduceSync(ctx, probe).FirstErr(); err != nil {
		return fmt.Errorf("kafkafence: writing the fence topic's probe: %w", err)
	}
	return p.readBelow(ctx, probe.Offset+1)
}

// probeKey cannot be a resource's: resources are not empty.
const probeKey = ""

// readBelow reads the fence topic up to offset (exclusive), noting the highest token of
// the resource; the record just below offset must be one the reader is given (not a
// transaction marker). Records not yet committed, and aborted ones, count: a token that was
// written was granted, so any lower one is stale.
func (p *Producer) readBelow(ctx context.Context, offset int64) error {
	for p.read < offset {
		fetches := p.reader.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.Canceled) {
				return fmt.Errorf("kafkafence: reading the fence topic: %w", fe.Err)
			}
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if string(r.Key) == p.cfg.Resource {
				if t, err := strconv.ParseInt(string(r.Value), 10, 64); err == nil && t > p.highest {
					p.highest = t
				}
			}
			p.read = max(p.read, r.Offset+1)
		})
	}
	return nil
}

// abort ends the open transaction without committing and returns err. Produce then
// closes the producer: the next transaction starts a new one, which makes the broker
// abort whatever of this transaction the abort could not (a broker that did not answer,
// a producer fenced meanwhile).
func (p *Producer) abort(ctx context.Context, err error) error {
	if p.producer != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
		if p.producer.AbortBufferedRecords(ctx) == nil {
			_ = p.producer.EndTransaction(ctx, kgo.TryAbort)
		}
	}
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		return err
	}
	return fmt.Errorf("kafkafence: %w", err)
}

// abortTimeout bounds an abort after the caller's context ended.
const abortTimeout = 10 * time.Second

// replaced is an error of a producer that another producer of the same transactional ID
// replaced, or whose transaction the broker gave up on.
func replaced(err error) bool {
	for _, e := range []error{kerr.ProducerFenced, kerr.InvalidProducerEpoch, kerr.InvalidTxnState,
		kerr.TransactionAbortable, kerr.UnknownProducerID, kerr.InvalidProducerIDMapping} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Close closes the connections.
func (p *Producer) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.producer != nil {
		p.producer.Close()
	}
	p.reader.Close()
}

// TokenOf is the token a record was produced with, from its TokenHeader.
func TokenOf(r *kgo.Record) (int64, bool) {
	for _, h := range r.Headers {
		if h.Key == TokenHeader {
			t, err := strconv.ParseInt(string(h.Value), 10, 64)
			return t, err == nil
		}
	}
	return 0, false
}
