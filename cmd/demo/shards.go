package main

import (
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// The second act: a 3-shard invoice scheduler (a FencedLease with spec.holders: 3, one
// slot per shard), four pods — three holders and a standby — each shard's holder
// invoicing its tenants period after period, every write fenced per slot. Slot 1's holder
// is paused past its lease: slot 1 alone fails over, to the standby, the paused holder's
// delayed write is rejected, and slots 0 and 2 never stop.
const (
	shardsNS     = "billing-shards"
	shardsLease  = "invoices"
	shardCount   = 3
	shardPeriods = 16
)

var (
	shardPods    = []string{"shard-a", "shard-b", "shard-c", "shard-d"}
	shardTenants = []string{"tenant-1", "tenant-2", "tenant-3", "tenant-4", "tenant-5", "tenant-6", "tenant-7", "tenant-8", "tenant-9"}
)

func runShards(ctx context.Context, c *cluster, o options, tl *timeline) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	seconds := int32(o.duration / time.Second)
	tl.add("demo", "ACT 2: FencedLease %s/%s with spec.holders: %d (one slot per shard), lease %ds, revocationPolicy KeepPod",
		shardsNS, shardsLease, shardCount, seconds)
	if err := c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shardsNS}}); err != nil {
		return false, err
	}
	if err := c.client.Create(ctx, &fencingv1.FencedLease{
		ObjectMeta: metav1.ObjectMeta{Namespace: shardsNS, Name: shardsLease},
		Spec: fencingv1.FencedLeaseSpec{LeaseDurationSeconds: seconds, RevocationPolicy: fencingv1.KeepPodPolicy,
			Holders: shardCount},
	}); err != nil {
		return false, err
	}
	var victim string // slot 1's first holder, paused before a write
	paused := make(chan struct{}, 1)
	var mu sync.Mutex // guards pausing and duringPause
	var pausing bool
	duringPause := map[string]int{} // runs written by each pod while the victim was paused
	k := &kubelet{c: c, scheduler: o.scheduler,
		args: []string{"--dsn", o.dsn, "--work", "300ms", "--shards", fmt.Sprint(shardCount), "--periods", fmt.Sprint(shardPeriods),
			"--tenants", strings.Join(shardTenants, ",")},
		procs: map[string]*exec.Cmd{}, exits: map[string]int{},
		onLine: func(pod, line string) {
			tl.add(pod, "%s", line)
			if strings.Contains(line, "created with token") {
				mu.Lock()
				if pausing {
					duringPause[pod]++
				}
				mu.Unlock()
			}
			if pod == victim && strings.Contains(line, "2026-02") && strings.HasPrefix(line, "grant valid; writing") {
				select {
				case paused <- struct{}{}:
				default:
				}
			}
		},
		onExit: func(pod string, code int) { tl.add(pod, "exited with code %d", code) },
	}
	defer k.killAll()
	for _, name := range shardPods {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: shardsNS, Name: name, Labels: map[string]string{fencingv1.LeaseLabel: shardsLease}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "scheduler", Image: "invoice-scheduler"}}},
		}
		if err := c.client.Create(ctx, p); err != nil {
			return false, err
		}
	}
	tl.add("demo", "created pods %s: three will hold a slot each, one waits", strings.Join(shardPods, ", "))

	first := map[int32]string{} // slot → its first holder, "pod/token"
	step := func(cond func(fl *fencingv1.FencedLease) bool) error {
		return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			fl := &fencingv1.FencedLease{}
			if err := c.client.Get(ctx, client.ObjectKey{Namespace: shardsNS, Name: shardsLease}, fl); err != nil {
				return false, err
			}
			for _, s := range fl.Status.Slots {
				if h := s.Holder; h != nil && first[s.Slot] == "" {
					first[s.Slot] = fmt.Sprintf("%s/%d", h.PodName, h.Token)
					tl.add("operator", "slot %d granted to %s with token %d", s.Slot, h.PodName, h.Token)
					if s.Slot == 1 {
						victim = h.PodName
					}
				}
			}
			pods := &corev1.PodList{}
			if err := c.client.List(ctx, pods, client.InNamespace(shardsNS)); err != nil {
				return false, err
			}
			for i := range pods.Items {
				if err := k.startIfGranted(ctx, &pods.Items[i]); err != nil {
					return false, err
				}
			}
			return cond(fl), nil
		})
	}

	// 1. Three shards run; slot 1's holder is paused before its write of period 2026-02.
	if err := step(func(*fencingv1.FencedLease) bool { return len(paused) > 0 }); err != nil {
		return false, fmt.Errorf("waiting for slot 1's holder to reach its write: %w", err)
	}
	k.signal(victim, syscall.SIGSTOP)
	mu.Lock()
	pausing = true
	mu.Unlock()
	pausedAt := time.Now()
	tl.add("demo", "SIGSTOP %s, slot 1's holder, for %v: slots 0 and 2 carry on", victim, 2*o.duration)

	// 2. Slot 1 alone fails over: its lease runs out, the standby gets slot 1 and a new
	//    token, and writes slot 1's runs.
	var successor string
	if err := step(func(fl *fencingv1.FencedLease) bool {
		if s := slotStatus(fl, 1); s.Holder != nil && s.Holder.PodName != victim && successor == "" {
			successor = s.Holder.PodName
			tl.add("operator", "revoked %s (slot 1): %s; slot 1 granted to %s with token %d", victim, s.LastRevocation.Reason,
				successor, s.Holder.Token)
		}
		mu.Lock()
		wrote := duringPause[successor] > 0
		mu.Unlock()
		return wrote && time.Since(pausedAt) >= 2*o.duration
	}); err != nil {
		return false, fmt.Errorf("waiting for slot 1's failover: %w", err)
	}

	// 3. The paused holder resumes and sends its delayed write with its old token.
	mu.Lock()
	pausing = false
	mu.Unlock()
	tl.add("demo", "SIGCONT %s: it resumes believing it still holds slot 1", victim)
	k.signal(victim, syscall.SIGCONT)
	if err := step(func(*fencingv1.FencedLease) bool {
		for _, pod := range []string{victim, successor, holderPod(first[0]), holderPod(first[2])} {
			if _, done := k.exitCode(pod); !done {
				return false
			}
		}
		return true
	}); err != nil {
		return false, fmt.Errorf("waiting for the shards to finish: %w", err)
	}
	mu.Lock()
	during := fmt.Sprintf("%d and %d", duringPause[holderPod(first[0])], duringPause[holderPod(first[2])])
	carriedOn := duringPause[holderPod(first[0])] > 0 && duringPause[holderPod(first[2])] > 0
	mu.Unlock()
	return reportShards(ctx, o, k, first, victim, successor, carriedOn, during)
}

// holderPod is the pod of "pod/token".
func holderPod(grant string) string {
	pod, _, _ := strings.Cut(grant, "/")
	return pod
}

// slotStatus is slot i of fl's status.
func slotStatus(fl *fencingv1.FencedLease, i int32) fencingv1.Slot {
	for _, s := range fl.Status.Slots {
		if s.Slot == i {
			return s
		}
	}
	return fencingv1.Slot{Slot: i}
}

// reportShards prints the shards' ledger and checks the second act's invariant.
func reportShards(ctx context.Context, o options, k *kubelet, first map[int32]string, victim, successor string, carriedOn bool, during string) (bool, error) {
	db, err := openReport(o)
	if err != nil {
		return false, err
	}
	defer db.Close()
	in := "('" + strings.Join(shardTenants, "','") + "')"
	fmt.Println("\nLEDGER invoice_runs of the shards, by tenant and token (tenant, token, created_by, runs):")
	if _, err := rows(ctx, db, `SELECT tenant, token, created_by, COUNT(*) FROM invoice_runs WHERE tenant IN `+in+` GROUP BY tenant, token, created_by ORDER BY tenant, token`); err != nil {
		return false, err
	}
	var runs int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM invoice_runs WHERE tenant IN `+in).Scan(&runs); err != nil {
		return false, err
	}
	fmt.Println("LEDGER fencing_tokens of the shards (resource, highest accepted token):")
	if _, err := rows(ctx, db, `SELECT resource, token FROM fencing_tokens WHERE resource LIKE 'invoices/slot-%' ORDER BY resource`); err != nil {
		return false, err
	}
	fl := &fencingv1.FencedLease{}
	if err := k.c.client.Get(ctx, client.ObjectKey{Namespace: shardsNS, Name: shardsLease}, fl); err != nil {
		return false, err
	}
	kept := true
	for _, s := range []int32{0, 2} {
		if slotStatus(fl, s).LastRevocation != nil {
			kept = false
		}
		if c, _ := k.exitCode(holderPod(first[s])); c != 0 {
			kept = false
		}
	}
	victimCode, _ := k.exitCode(victim)
	s1 := slotStatus(fl, 1)
	return printChecks("CHECKS (act 2)", []check{
		{runs == len(shardTenants)*shardPeriods, fmt.Sprintf("exactly one invoice run per tenant and period: %d for %d tenants × %d periods", runs, len(shardTenants), shardPeriods)},
		{victimCode == exitStale, fmt.Sprintf("the paused holder of slot 1 had its delayed write rejected as stale (exit code %d)", victimCode)},
		{s1.LastRevocation != nil && s1.LastRevocation.PodName == victim && fl.Status.Revocations == 1, "slot 1's paused holder was revoked, and only it"},
		{successor != "" && successor != victim, fmt.Sprintf("slot 1 failed over to %s", successor)},
		{kept && carriedOn, fmt.Sprintf("slots 0 and 2 never stopped: never revoked, their holders (%s, %s) wrote %s runs while slot 1's was paused, and finished", first[0], first[2], during)},
	}), nil
}

// openReport opens the ledger read-only.
func openReport(o options) (*sql.DB, error) {
	driver, dsn := "sqlite", "file:"+o.dsn+"?mode=ro"
	if strings.HasPrefix(o.dsn, "postgres") {
		driver, dsn = "pgx", o.dsn
	}
	return sql.Open(driver, dsn)
}
