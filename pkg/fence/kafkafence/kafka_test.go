package kafkafence_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencedlease/fencedlease/pkg/fence"
	"github.com/fencedlease/fencedlease/pkg/fence/kafkafence"
	"github.com/fencedlease/fencedlease/test/testenv"
)

const (
	resource = "billing/invoice-run"
	topic    = "invoices"
)

// connect waits for the broker and makes the data topic (one partition: one total order
// to check).
func connect(t *testing.T, k *testenv.Kafka) []kgo.Opt {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(k.Addr()), kgo.RequestRetries(2), kgo.RetryTimeout(5 * time.Second)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	admin := kadm.NewClient(cl)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := admin.CreateTopic(ctx, 1, -1, nil, topic)
		cancel()
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			return opts
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker is not answering: %v", err)
		}
	}
}

func producer(t *testing.T, opts []kgo.Opt, token int64, reg prometheus.Registerer) *kafkafence.Producer {
	t.Helper()
	cfg := kafkafence.Config{Resource: resource, Token: token}
	if reg != nil {
		cfg.Metrics = fence.NewMetrics(reg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := kafkafence.NewProducer(ctx, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func invoice(s string) *kgo.Record { return &kgo.Record{Topic: topic, Value: []byte(s)} }

func produce(p *kafkafence.Producer, values ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var records []*kgo.Record
	for _, v := range values {
		records = append(records, invoice(v))
	}
	return p.Produce(ctx, records...)
}

// committed reads the data topic read-committed to its end (a record it produces there,
// not in a transaction, after every transaction so far): each record's value and token.
func committed(t *testing.T, opts []kgo.Opt) (values []string, tokens []int64) {
	t.Helper()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	end := &kgo.Record{Topic: topic, Value: []byte("end")}
	if err := cl.ProduceSync(ctx, end).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for done := false; !done; {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s to offset %d: %v", topic, end.Offset, ctx.Err())
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end.Offset {
				done = true
				return
			}
			tok, ok := kafkafence.TokenOf(r)
			if !ok {
				return // an earlier call's end
			}
			values, tokens = append(values, string(r.Value)), append(tokens, tok)
		})
	}
	return values, tokens
}

// The seed's story on a Kafka broker: holder 1 produces; it pauses past its lease; holder
// 2 (token 2) starts its producer and produces; holder 1's paused producer is fenced by
// the broker's epoch, and a new producer it starts with token 1 is refused by the token
// check — neither commits, and holder 2 goes on producing. Then the same across a paused
// and a killed broker.
func TestKafkaFenceRefusesTheOldHoldersLateRecords(t *testing.T) {
	k := testenv.StartKafka(t)
	opts := connect(t, k)
	reg := prometheus.NewRegistry()

	holder1 := producer(t, opts, 1, reg)
	if err := produce(holder1, "1: january"); err != nil {
		t.Fatalf("token 1's first transaction: %v", err)
	}
	holder2 := producer(t, opts, 2, nil)
	if err := produce(holder2, "2: february"); err != nil {
		t.Fatalf("token 2: %v", err)
	}
	err := produce(holder1, "1: late, from the paused producer")
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || stale.Stored != 2 || stale.Offered != 1 || stale.Resource != resource {
		t.Fatalf("the paused producer's late transaction: %v, want a StaleTokenError with 2 stored", err)
	}
	restarted := producer(t, opts, 1, nil)
	if err := produce(restarted, "1: late, from a new producer"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("a new producer with token 1: %v, want ErrStaleToken", err)
	}
	// The refused producer's start fenced holder 2's producer; holder 2's next
	// transaction starts a new one and commits.
	if err := produce(holder2, "2: march"); err != nil {
		t.Fatalf("token 2 after a stale producer started: %v", err)
	}
	values, tokens := committed(t, opts)
	if want := []string{"1: january", "2: february", "2: march"}; fmt.Sprint(values) != fmt.Sprint(want) || fmt.Sprint(tokens) != "[1 2 2]" {
		t.Fatalf("committed %q with tokens %v, want %q with [1 2 2]", values, tokens, want)
	}
	if err := holder2.Produce(context.Background(), &kgo.Record{Topic: kafkafence.DefaultFenceTopic, Key: []byte(resource), Value: []byte("99")}); err == nil {
		t.Fatal("a record of the caller's for the fence topic was accepted")
	}
	if got := testenv.FenceWrites(reg, resource, "stale"); got != 1 {
		t.Fatalf("fencedlease_fence_writes_total{stale} of holder 1 = %v, want 1", got)
	}

	t.Log("paused: a transaction fails (not as stale); resumed, the fence holds")
	// A producer gives up on its records after its delivery timeout (unbounded by default).
	impatient := producer(t, append(append([]kgo.Opt{}, opts...), kgo.RecordDeliveryTimeout(time.Second)), 2, nil)
	k.Pause()
	short, cancel := context.WithTimeout(context.Background(), time.Second)
	err = impatient.Produce(short, invoice("2: during the pause"))
	cancel()
	k.Resume()
	if err == nil || errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("a transaction on a paused broker: %v, want a plain error", err)
	}

	t.Log("killed and restarted: the tokens are in the log")
	k.Restart()
	connect(t, k)
	again := producer(t, opts, 1, nil)
	if err := produce(again, "1: after the restart"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("token 1 after a restart: %v, want ErrStaleToken", err)
	}
	holder3 := producer(t, opts, 3, nil)
	if err := produce(holder3, "3: april"); err != nil {
		t.Fatalf("token 3 after the restart: %v", err)
	}
	values, tokens = committed(t, opts)
	for _, v := range values {
		if strings.Contains(v, "late") || strings.Contains(v, "after the restart") {
			t.Fatalf("a refused record was committed: %q", values)
		}
	}
	if n := len(tokens); n == 0 || tokens[n-1] != 3 {
		t.Fatalf("committed tokens %v, want token 3's last", tokens)
	}
}

// Racing holders: producers of rising tokens start while older ones are still producing.
// Read committed, the records' tokens never go down, and the highest token's records are
// there.
func TestKafkaFenceUnderRacingProducers(t *testing.T) {
	k := testenv.StartKafka(t)
	opts := connect(t, k)
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted, refused := 0, 0
	for token := int64(1); token <= 6; token++ {
		p := producer(t, opts, token, nil)
		wg.Go(func() {
			for i := range 8 {
				err := produce(p, fmt.Sprintf("%d/%d", token, i))
				mu.Lock()
				switch {
				case err == nil:
					accepted++
				case errors.Is(err, fence.ErrStaleToken):
					refused++
				default:
					t.Errorf("token %d: %v", token, err)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
		time.Sleep(30 * time.Millisecond)
	}
	wg.Wait()
	_, tokens := committed(t, opts)
	for i := 1; i < len(tokens); i++ {
		if tokens[i] < tokens[i-1] {
			t.Fatalf("token %d committed after token %d: %v", tokens[i], tokens[i-1], tokens)
		}
	}
	if n := len(tokens); n == 0 || tokens[n-1] != 6 {
		t.Fatalf("committed tokens %v, want token 6's last", tokens)
	}
	if refused == 0 {
		t.Fatalf("accepted %d, refused none: the race did not exercise the fence", accepted)
	}
	t.Logf("accepted %d transactions, refused %d; committed tokens %v", accepted, refused, tokens)
}

// The shards of a FencedLease with slots are fenced per slot (fence.ForSlot): one
// transactional ID per slot, so slot 0's holder still produces after slot 1's newer token
// did; an older holder of slot 0 is refused.
func TestKafkaFenceFencesEachSlotApart(t *testing.T) {
	k := testenv.StartKafka(t)
	opts := connect(t, k)
	slotProducer := func(slot int32, token int64) *kafkafence.Producer {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		p, err := kafkafence.NewProducer(ctx, kafkafence.Config{Resource: fence.ForSlot(resource, slot), Token: token}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	for _, step := range []struct {
		slot  int32
		token int64
		stale bool
	}{{1, 5, false}, {0, 4, false}, {0, 6, false}, {0, 4, true}, {1, 5, false}} {
		err := produce(slotProducer(step.slot, step.token), fmt.Sprintf("slot %d token %d", step.slot, step.token))
		if stale := errors.Is(err, fence.ErrStaleToken); stale != step.stale || err != nil && !stale {
			t.Fatalf("slot %d token %d: %v (stale wanted: %v)", step.slot, step.token, err, step.stale)
		}
	}
}
