package main

import (
	"math"
	"runtime/debug"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestMemoryLimitIsAShareOfTheContainers(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

	got, err := setMemoryLimit(env(map[string]string{memoryLimitEnv: "268435456"}))
	if err != nil || got != 228170137 || debug.SetMemoryLimit(-1) != got {
		t.Errorf("256 MiB container: soft limit %d (%v), runtime %d; want 85 %% = 228170137", got, err, debug.SetMemoryLimit(-1))
	}
	debug.SetMemoryLimit(math.MaxInt64)
	if got, err := setMemoryLimit(env(map[string]string{memoryLimitEnv: "268435456", "GOMEMLIMIT": "100MiB"})); got != 0 || err != nil {
		t.Errorf("an explicit GOMEMLIMIT must win: set %d (%v)", got, err)
	}
	if got, err := setMemoryLimit(env(nil)); got != 0 || err != nil || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Errorf("no limit given: set %d (%v)", got, err)
	}
	for _, bad := range []string{"256Mi", "-1", "0"} {
		if _, err := setMemoryLimit(env(map[string]string{memoryLimitEnv: bad})); err == nil {
			t.Errorf("%s=%q accepted", memoryLimitEnv, bad)
		}
	}
}

// The bundle's Deployment tells the operator its container's memory limit, so the soft
// limit above follows whatever limit an operator of the cluster sets.
func TestTheDeploymentPassesItsMemoryLimit(t *testing.T) {
	d := &appsv1.Deployment{}
	bundled(t, defaultBundle, "Deployment", d)
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "manager" {
			continue
		}
		if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
			t.Fatal("the manager container has no memory limit")
		}
		for _, e := range c.Env {
			if e.Name == memoryLimitEnv && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil &&
				e.ValueFrom.ResourceFieldRef.Resource == "limits.memory" {
				if d := e.ValueFrom.ResourceFieldRef.Divisor; !d.IsZero() && d.Value() != 1 {
					t.Errorf("%s has divisor %s: the operator reads bytes", memoryLimitEnv, d.String())
				}
				return
			}
		}
		t.Fatalf("the manager container does not set %s from limits.memory", memoryLimitEnv)
	}
	t.Fatal("no manager container in the bundle's Deployment")
}
