package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"sync"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// kubelet plays the part the embedded control plane lacks: it starts a pod's container
// (a local process) once the pod is no longer gated, with the env the real kubelet would
// resolve, reports the phase back, and reports each line the process prints.
type kubelet struct {
	c         *cluster
	scheduler string
	args      []string
	mu        sync.Mutex
	procs     map[string]*exec.Cmd
	exits     map[string]int
	onLine    func(pod, line string)
	onExit    func(pod string, code int)
	wg        sync.WaitGroup
}

// startIfGranted starts the pod's process once, when its gate is gone.
func (k *kubelet) startIfGranted(ctx context.Context, p *corev1.Pod) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, started := k.procs[p.Name]; started || len(p.Spec.SchedulingGates) > 0 || p.DeletionTimestamp != nil {
		return nil
	}
	cmd := exec.Command(k.scheduler, k.args...)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+k.c.kubeconfig,
		fencingv1.EnvToken+"="+p.Annotations[fencingv1.TokenAnnotation],
		fencingv1.EnvLeaseName+"="+p.Labels[fencingv1.LeaseLabel],
		fencingv1.EnvLeaseNamespace+"="+p.Namespace,
		fencingv1.EnvHolderIdentity+"="+p.Name,
	)
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == fencingv1.EnvSlot { // admission's, in a FencedLease with slots
			cmd.Env = append(cmd.Env, fencingv1.EnvSlot+"="+p.Annotations[fencingv1.SlotAnnotation])
		}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	k.procs[p.Name] = cmd
	k.setPhase(ctx, p, corev1.PodRunning)
	name := p.Name
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			k.onLine(name, lines.Text())
		}
		_ = cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		k.mu.Lock()
		k.exits[name] = code
		k.mu.Unlock()
		phase := corev1.PodSucceeded
		if code != 0 {
			phase = corev1.PodFailed
		}
		k.setPhase(ctx, &corev1.Pod{ObjectMeta: p.ObjectMeta}, phase)
		k.onExit(name, code)
	}()
	return nil
}

func (k *kubelet) setPhase(ctx context.Context, p *corev1.Pod, phase corev1.PodPhase) {
	fresh := &corev1.Pod{}
	if err := k.c.client.Get(ctx, client.ObjectKeyFromObject(p), fresh); err != nil {
		return // deleted: nothing to report to
	}
	fresh.Status.Phase = phase
	_ = k.c.client.Status().Update(ctx, fresh)
}

func (k *kubelet) signal(pod string, sig syscall.Signal) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.procs[pod]; p != nil {
		_ = p.Process.Signal(sig)
	}
}

func (k *kubelet) exitCode(pod string) (int, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, ok := k.exits[pod]
	return c, ok
}

func (k *kubelet) killAll() {
	k.mu.Lock()
	for name, p := range k.procs {
		if _, done := k.exits[name]; !done {
			_ = p.Process.Signal(syscall.SIGCONT)
			_ = p.Process.Kill()
		}
	}
	k.mu.Unlock()
	k.wg.Wait()
}
