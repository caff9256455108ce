// Command kafka-invoices is a worked example: a singleton job that emits invoice events to
// Kafka, fenced by the token of its FencedLease grant. Run it in a labeled pod (Cold:
// FENCING_TOKEN is in its environment; Warm: it waits for the grant). Every holder of the
// FencedLease produces under one transactional ID, so the broker fences the older
// producer once a newer one has started, and each transaction is committed only if no
// higher token reached the fence topic first. A holder that paused past its lease and
// wakes after its successor produced gets fence.ErrStaleToken, and none of its records is
// committed. Consumers read with isolation read_committed; each record carries the token
// in its fencing-token header (kafkafence.TokenOf).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fencedlease/fencedlease/pkg/fence"
	"github.com/fencedlease/fencedlease/pkg/fence/kafkafence"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "kafka-invoices:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(ctrl.GetConfigOrDie())
	if err != nil {
		return err
	}
	cfg, err := holder.Config{Leases: holder.ClientGo(cs.CoordinationV1())}.NamesFromEnv()
	if err != nil {
		return err
	}
	h, err := holder.StartWhenGranted(ctx, cfg) // at once in a Cold pod: it was granted before it started
	if err != nil {
		return err
	}
	defer func() { _ = h.Release(context.Background()) }()

	p, err := kafkafence.NewProducer(h.Context(), kafkafence.Config{Resource: cfg.Namespace + "/" + cfg.LeaseName, Token: h.Token()},
		kgo.SeedBrokers(strings.Split(os.Getenv("KAFKA_BROKERS"), ",")...),
		kgo.RecordDeliveryTimeout(30*time.Second)) // a broker that does not answer fails the transaction instead of blocking it
	if err != nil {
		return err
	}
	defer p.Close()

	var events []*kgo.Record // the job's work
	for _, customer := range []string{"ada", "grace", "linus"} {
		events = append(events, &kgo.Record{Topic: "invoices", Key: []byte(customer), Value: []byte(`{"amount":42}`)})
	}
	write, cancel := context.WithDeadline(h.Context(), h.Deadline())
	defer cancel()
	err = p.Produce(write, events...)
	if errors.Is(err, fence.ErrStaleToken) {
		return fmt.Errorf("a newer holder produced first; this one stops: %w", err)
	}
	return err
}
