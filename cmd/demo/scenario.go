package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

const (
	ns    = "billing"
	lease = "invoices-tenant-7"
)

var workers = []string{"scheduler-1", "scheduler-2", "scheduler-3"}

// run plays the stale-holder timeline and reports whether the invariant held.
func run(ctx context.Context, o options) (bool, error) {
	tl := &timeline{start: time.Now()}
	tl.add("demo", "starting an embedded control plane with the operator and the admission policies")
	c, err := startCluster(o)
	if err != nil {
		return false, err
	}
	defer c.stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	paused := make(chan struct{}, 1)
	k := &kubelet{c: c, scheduler: o.scheduler, args: []string{"--dsn", o.dsn, "--work", "1s"},
		procs: map[string]*exec.Cmd{}, exits: map[string]int{},
		onLine: func(pod, line string) {
			tl.add(pod, "%s", line)
			if pod == workers[0] && strings.HasPrefix(line, "grant valid; writing") {
				paused <- struct{}{}
			}
		},
		onExit: func(pod string, code int) { tl.add(pod, "exited with code %d", code) },
	}
	defer k.killAll()

	seconds := int32(o.duration / time.Second)
	tl.add("demo", "FencedLease %s/%s, lease duration %ds, revocationPolicy KeepPod", ns, lease, seconds)
	if err := c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return false, err
	}
	if err := c.client.Create(ctx, &fencingv1.FencedLease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
		Spec:       fencingv1.FencedLeaseSpec{LeaseDurationSeconds: seconds, RevocationPolicy: fencingv1.KeepPodPolicy},
	}); err != nil {
		return false, err
	}
	for _, name := range workers {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{fencingv1.LeaseLabel: lease}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "scheduler", Image: "invoice-scheduler"}}},
		}
		if err := c.client.Create(ctx, p); err != nil {
			return false, err
		}
		tl.add("demo", "created pod %s: admission gated it (%d gate), state %s",
			name, len(p.Spec.SchedulingGates), p.Annotations[fencingv1.StateAnnotation])
	}

	watch := &operatorWatch{c: c, tl: tl}
	step := func(cond func() bool) error {
		return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			if err := watch.poll(ctx); err != nil {
				return false, err
			}
			pods := &corev1.PodList{}
			if err := c.client.List(ctx, pods, client.InNamespace(ns)); err != nil {
				return false, err
			}
			for i := range pods.Items {
				if err := k.startIfGranted(ctx, &pods.Items[i]); err != nil {
					return false, err
				}
			}
			return cond(), nil
		})
	}

	// 1. scheduler-1 is granted, starts, checks its lease, and is paused before it writes.
	if err := step(func() bool { return len(paused) > 0 }); err != nil {
		return false, fmt.Errorf("waiting for scheduler-1 to reach its write: %w", err)
	}
	k.signal(workers[0], syscall.SIGSTOP)
	pausedAt := time.Now()
	tl.add("demo", "SIGSTOP %s (a GC pause, a frozen node) for %v, twice the lease duration", workers[0], 2*o.duration)

	// 2. Its lease expires; the operator revokes it and grants scheduler-2 token 2, which
	//    writes the run; scheduler-3 follows with token 3 and finds the run already there.
	if err := step(func() bool {
		_, done2 := k.exitCode(workers[1])
		return done2 && time.Since(pausedAt) >= 2*o.duration
	}); err != nil {
		return false, fmt.Errorf("waiting for the failover: %w", err)
	}

	// 3. scheduler-1 resumes and sends its delayed write with token 1.
	k.signal(workers[0], syscall.SIGCONT)
	tl.add("demo", "SIGCONT %s: it resumes believing it still holds token 1", workers[0])
	if err := step(func() bool {
		_, done1 := k.exitCode(workers[0])
		_, done3 := k.exitCode(workers[2])
		return done1 && done3
	}); err != nil {
		return false, fmt.Errorf("waiting for the schedulers to finish: %w", err)
	}
	_ = watch.poll(ctx)
	ok, err := report(ctx, tl, o, k, watch)
	if err != nil || !ok {
		return ok, err
	}
	if o.svg != "" {
		if err := os.WriteFile(o.svg, []byte(picture(tl.snapshot(), seconds)), 0o644); err != nil {
			return false, err
		}
	}
	k.killAll()
	return runShards(context.Background(), c, o, tl)
}

// operatorWatch turns FencedLease status changes into timeline lines.
type operatorWatch struct {
	c           *cluster
	tl          *timeline
	holder      string
	revocations int64
	grants      []int64
}

func (w *operatorWatch) poll(ctx context.Context) error {
	fl := &fencingv1.FencedLease{}
	if err := w.c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: lease}, fl); err != nil {
		return err
	}
	st := fl.Status
	if st.Revocations != w.revocations && st.LastRevocation != nil {
		w.revocations = st.Revocations
		rv := st.LastRevocation
		w.tl.add("operator", "revoked %s (token %d): %s; pod marked Revoked", rv.PodName, rv.Token, rv.Reason)
	}
	cur := ""
	if h := st.Holder; h != nil {
		cur = fmt.Sprintf("%s/%d", h.PodName, h.Token)
		if cur != w.holder {
			w.grants = append(w.grants, h.Token)
			w.tl.add("operator", "granted token %d to %s (gate removed); %d waiting", h.Token, h.PodName, st.Waiting)
		}
	}
	w.holder = cur
	return nil
}
