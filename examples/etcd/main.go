// Command etcd-report is a worked example: a singleton job that publishes a report into
// etcd, fenced by the token of its FencedLease grant. Run it in a labeled pod (Cold:
// FENCING_TOKEN is in its environment; Warm: it waits for the grant). A holder that paused
// past its lease and wakes after its successor published gets fence.ErrStaleToken, and
// its late report is not written.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fencedlease/fencedlease/pkg/fence"
	"github.com/fencedlease/fencedlease/pkg/fence/etcdfence"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "etcd-report:", err)
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

	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{os.Getenv("ETCD_ENDPOINT")}, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer etcd.Close()
	f := &etcdfence.Fence{Client: etcd}

	report := fmt.Sprintf("report built at %s by token %d", time.Now().UTC().Format(time.RFC3339), h.Token())
	write, cancel := context.WithDeadline(h.Context(), h.Deadline())
	defer cancel()
	_, err = f.Txn(write, "reports/daily", h.Token(), clientv3.OpPut("/reports/daily", report))
	if errors.Is(err, fence.ErrStaleToken) {
		return fmt.Errorf("a newer holder published first; this one stops: %w", err)
	}
	return err
}
