package fencedlease

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/controllers/fencedlease/internal/decision"
	"github.com/fencedlease/fencedlease/pkg/leaserecord"
)

// ruleCase is one row of a rule's table: an input built by mod from a holder a of token
// 1 on a 10 s lease, granted at t0 and seen renewing at t0, judged at the fake clock's
// t0+5s; and the verdict the rule must give.
type ruleCase struct {
	name       string
	mod        func(in *decision.Input)
	applies    bool
	kind       decision.TransitionKind
	revocation fencingv1.RevocationReason
	release    fencingv1.ReleaseReason
	leaseFirst bool
	requeue    time.Duration
}

func ruleInput(c *clocktesting.FakeClock, mod func(*decision.Input)) *decision.Input {
	fl := newFL(10)
	h := &fencingv1.Holder{PodName: "a", PodUID: "uid-a", Token: 1, AcquireTime: *decision.MicroTime(t0),
		LeaseDurationSeconds: 10, StartupDeadlineSeconds: 20, FirstRenewTime: decision.MicroTime(t0)}
	fl.Status = fencingv1.FencedLeaseStatus{FencingToken: 1, Holder: h}
	a := pod("a", t0)
	lease := leaseFor(h, t0.Add(time.Second))
	w := decision.World{FL: fl, Lease: lease, Pods: []*corev1.Pod{&a}, Holder: &a, Now: c.Now(),
		Held: decision.GrantRecord{Renewal: decision.Renewal{UID: h.PodUID, Token: 1, ObservedAt: t0, SeenRenewing: true}}}
	if mod != nil {
		in := &decision.Input{World: w, H: h}
		mod(in) // changes the world; classify below derives the rest
		w, h = in.World, in.H
	}
	w.Record = leaserecord.Read(w.Lease)  // as observe decodes it
	w.Recorded = w.FL.Status.FencingToken // as observe takes it, without slots
	in := decision.Classify(w, h)
	return &in
}

func runRuleTable(t *testing.T, judge func(*decision.Input) (decision.Transition, bool), cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := clocktesting.NewFakeClock(t0.Add(5 * time.Second))
			got, ok := judge(ruleInput(c, tc.mod))
			if ok != tc.applies {
				t.Fatalf("applies = %v, want %v (%+v)", ok, tc.applies, got)
			}
			if !ok {
				return
			}
			if got.Kind != tc.kind || got.Revocation != tc.revocation || got.Release != tc.release || got.LeaseFirst != tc.leaseFirst {
				t.Fatalf("got %s %q/%q leaseFirst=%v, want %s %q/%q leaseFirst=%v",
					got.Kind, got.Revocation, got.Release, got.LeaseFirst, tc.kind, tc.revocation, tc.release, tc.leaseFirst)
			}
			if tc.requeue != 0 && got.RequeueAfter != tc.requeue {
				t.Fatalf("requeueAfter = %v, want %v", got.RequeueAfter, tc.requeue)
			}
		})
	}
}

// Helpers that change the world of ruleInput.
func cutOffLeaseOf(in *decision.Input) {
	in.Lease.Spec.HolderIdentity = nil
	delete(in.Lease.Annotations, fencingv1.HolderUIDAnnotation)
}
func neverRenewed(in *decision.Input) {
	in.H.FirstRenewTime = nil
	in.Lease.Spec.RenewTime = in.Lease.Spec.AcquireTime.DeepCopy()
}
func revokeAsked(in *decision.Input) {
	in.FL.Annotations = map[string]string{fencingv1.RevokeAnnotation: "1"}
}
func handoffAsked(grace int32, since time.Time) func(*decision.Input) {
	return func(in *decision.Input) {
		in.H.Handoff = &fencingv1.Handoff{SuccessorName: "n", SuccessorUID: "uid-n", GracePeriodSeconds: grace}
		in.HandoffSince = since
	}
}
func all(mods ...func(*decision.Input)) func(*decision.Input) {
	return func(in *decision.Input) {
		for _, m := range mods {
			m(in)
		}
	}
}
func at(offset time.Duration) func(*decision.Input) {
	return func(in *decision.Input) { in.Now = t0.Add(offset) }
}

func TestRuleForeignLease(t *testing.T) {
	foreign := func(in *decision.Input) { delete(in.Lease.Labels, fencingv1.LeaseLabel) }
	runRuleTable(t, decision.ForeignLeaseRule, []ruleCase{
		{name: "our Lease", applies: false},
		{name: "a foreign Lease keeps the grant and looks again", mod: foreign, applies: true, kind: decision.Keep, requeue: decision.ConflictRecheck},
		{name: "deletion still revokes", mod: all(foreign, func(in *decision.Input) { in.FL.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }),
			applies: true, kind: decision.Revoke, revocation: fencingv1.ReasonFencedLeaseDeleted},
	})
}

func TestRuleFinishAHalfDoneRevocation(t *testing.T) {
	remembered := func(reason fencingv1.RevocationReason) func(*decision.Input) {
		return func(in *decision.Input) {
			in.Held.Revoking = decision.PendingRevocation{Reason: reason, Lateness: time.Second}
		}
	}
	runRuleTable(t, decision.FinishRevocationRule, []ruleCase{
		{name: "the Lease still names the holder", applies: false},
		{name: "cut off after expiry, after a restart", mod: cutOffLeaseOf, applies: true, kind: decision.Revoke, revocation: fencingv1.ReasonLeaseExpired},
		{name: "cut off before the first renewal, after a restart", mod: all(neverRenewed, cutOffLeaseOf), applies: true,
			kind: decision.Revoke, revocation: fencingv1.ReasonStartupDeadlineExceeded},
		{name: "cut off on a revoke request: waits out the lease", mod: all(revokeAsked, cutOffLeaseOf), applies: false},
		{name: "cut off after a hand-off: waits out the lease", mod: all(handoffAsked(30, t0), cutOffLeaseOf), applies: false},
		{name: "cut off for a pod that cannot run, after a restart: waits out the lease", mod: cutOffForCannotRun, applies: false},
		{name: "the reason this process decided wins", mod: all(handoffAsked(30, t0), cutOffLeaseOf, remembered(fencingv1.ReasonLeaseExpired)),
			applies: true, kind: decision.Revoke, revocation: fencingv1.ReasonLeaseExpired},
		{name: "a remembered revoke request", mod: all(neverRenewed, revokeAsked, cutOffLeaseOf, remembered(fencingv1.ReasonRevokeRequested)),
			applies: true, kind: decision.Revoke, revocation: fencingv1.ReasonRevokeRequested},
	})
}

func waitingIn(reason string) func(*decision.Input) {
	return func(in *decision.Input) {
		in.Holder.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "work",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "pull failed"}}}}
	}
}
func unschedulableHolder(in *decision.Input) {
	in.Holder.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/2 nodes are available"}}
}
func startupDeadline120(in *decision.Input) { in.H.StartupDeadlineSeconds = 120 }

// Checks X7.
func TestRuleCannotStart(t *testing.T) {
	var cases []ruleCase
	for _, reason := range []string{"ImagePullBackOff", "CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError", "InvalidImageName"} {
		cases = append(cases,
			ruleCase{name: reason + " before the first renewal", mod: all(neverRenewed, waitingIn(reason)), applies: true, kind: decision.Revoke,
				revocation: fencingv1.ReasonPodCannotStart, leaseFirst: true},
			ruleCase{name: reason + " after the first renewal: it ran", mod: waitingIn(reason), applies: false})
	}
	for _, reason := range []string{"ErrImagePull", "ContainerCreating", "PodInitializing"} {
		cases = append(cases, ruleCase{name: reason + " is a start in progress", mod: all(neverRenewed, waitingIn(reason)), applies: false})
	}
	cases = append(cases,
		ruleCase{name: "starting normally", mod: neverRenewed, applies: false},
		ruleCase{name: "phase Failed before the first renewal", mod: all(neverRenewed, func(in *decision.Input) { in.Holder.Status.Phase = corev1.PodFailed }),
			applies: true, kind: decision.Revoke, revocation: fencingv1.ReasonPodCannotStart, leaseFirst: true},
		ruleCase{name: "unschedulable, within the bound", mod: all(neverRenewed, startupDeadline120, unschedulableHolder), applies: false},
		ruleCase{name: "unschedulable past the bound", mod: all(neverRenewed, startupDeadline120, unschedulableHolder, at(decision.UnschedulableBound)),
			applies: true, kind: decision.Revoke, revocation: fencingv1.ReasonPodCannotStart, leaseFirst: true},
		ruleCase{name: "the pod is gone: a release, not this", mod: all(neverRenewed, func(in *decision.Input) { in.Holder = nil }), applies: false},
	)
	runRuleTable(t, decision.CannotStartRule, cases)

	c := clocktesting.NewFakeClock(t0.Add(5 * time.Second))
	got, _ := decision.CannotStartRule(ruleInput(c, all(neverRenewed, waitingIn("ImagePullBackOff"))))
	if want := "container work: ImagePullBackOff: pull failed"; got.Message != want {
		t.Fatalf("message %q, want %q", got.Message, want)
	}
	// An unschedulable holder is looked at again when the bound ends, not at the deadline.
	keep, _ := decision.KeepRule(ruleInput(c, all(neverRenewed, startupDeadline120, unschedulableHolder)))
	if want := decision.UnschedulableBound - 5*time.Second; keep.RequeueAfter != want {
		t.Fatalf("requeueAfter %v, want %v", keep.RequeueAfter, want)
	}
}

func cutOffForCannotRun(in *decision.Input) {
	cutOffLeaseOf(in)
	in.Lease.Annotations[fencingv1.CutOffReasonAnnotation] = string(fencingv1.ReasonPodCannotRun)
}
func crashLooped(in *decision.Input) {
	in.Holder.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "work", RestartCount: 2,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}}}
}

// The hole behind a renewing sidecar: a holder that renewed and then cannot run is cut
// off at once and revoked when its lease runs out, not kept as long as the sidecar lives. (X9)
func TestRuleCannotRun(t *testing.T) {
	var cases []ruleCase
	for _, reason := range []string{"CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError", "ImagePullBackOff"} {
		cases = append(cases, ruleCase{name: reason + " after the first renewal", mod: waitingIn(reason), applies: true, kind: decision.CutOff,
			revocation: fencingv1.ReasonPodCannotRun, leaseFirst: true, requeue: 5 * time.Second})
	}
	restartedOnce := func(in *decision.Input) {
		in.Holder.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "work", RestartCount: 1,
			State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}}}
	}
	cases = append(cases,
		ruleCase{name: "running", applies: false},
		ruleCase{name: "restarted once and running again keeps the grant", mod: restartedOnce, applies: false},
		ruleCase{name: "before the first renewal it is cannot start, not this", mod: all(neverRenewed, crashLooped), applies: false},
		ruleCase{name: "the sidecar crash-loops", mod: func(in *decision.Input) {
			crashLooped(in)
			in.Holder.Status.InitContainerStatuses, in.Holder.Status.ContainerStatuses = in.Holder.Status.ContainerStatuses, nil
		}, applies: true, kind: decision.CutOff, revocation: fencingv1.ReasonPodCannotRun, leaseFirst: true},
		ruleCase{name: "the pod is gone: a release, not this", mod: func(in *decision.Input) { in.Holder = nil }, applies: false},
	)
	runRuleTable(t, decision.CannotRunRule, cases)

	c := clocktesting.NewFakeClock(t0.Add(5 * time.Second))
	got, _ := decision.CannotRunRule(ruleInput(c, crashLooped))
	if want := "container work: CrashLoopBackOff: back-off 10s; last exit: Error, code 1, 2 restarts"; got.Message != want {
		t.Fatalf("message %q, want %q", got.Message, want)
	}
}

func TestRuleReleased(t *testing.T) {
	runRuleTable(t, decision.ReleasedRule, []ruleCase{
		{name: "running", applies: false},
		{name: "pod gone", mod: func(in *decision.Input) { in.Holder = nil }, applies: true, kind: decision.Release, release: fencingv1.ReleasePodDeleted},
		{name: "pod finished", mod: func(in *decision.Input) { in.Holder.Status.Phase = corev1.PodSucceeded }, applies: true, kind: decision.Release, release: fencingv1.ReleasePodFinished},
		{name: "the holder cleared its Lease", mod: func(in *decision.Input) { in.Lease.Spec.HolderIdentity = nil }, applies: true, kind: decision.Release, release: fencingv1.ReleaseLeaseReleased},
		{name: "terminating keeps the grant", mod: func(in *decision.Input) { in.Holder.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }, applies: false},
		{name: "cut off is not a release", mod: cutOffLeaseOf, applies: false},
	})
}

func TestRuleCutOffRunsOut(t *testing.T) {
	runRuleTable(t, decision.CutOffRunsOutRule, []ruleCase{
		{name: "not cut off", applies: false},
		{name: "lease not run out yet", mod: all(handoffAsked(1, t0), cutOffLeaseOf), applies: true, kind: decision.Keep, requeue: 5 * time.Second},
		{name: "hand-off cut-off ran out", mod: all(handoffAsked(1, t0), cutOffLeaseOf, at(10*time.Second)), applies: true,
			kind: decision.Revoke, revocation: fencingv1.ReasonHandoffTimeout},
		{name: "revoke request ran out", mod: all(revokeAsked, cutOffLeaseOf, at(10*time.Second)), applies: true,
			kind: decision.Revoke, revocation: fencingv1.ReasonRevokeRequested},
		{name: "revoke request of a grant that never renewed: at once", mod: all(neverRenewed, revokeAsked, cutOffLeaseOf), applies: true,
			kind: decision.Revoke, revocation: fencingv1.ReasonRevokeRequested},
		{name: "cut off for a crash loop: waits out the lease", mod: all(crashLooped, cutOffForCannotRun), applies: true,
			kind: decision.Keep, requeue: 5 * time.Second},
		// Between two back-offs the container runs: the Lease, not the pod, says why.
		{name: "cut off for a crash loop, the container running again: waits out the lease", mod: cutOffForCannotRun, applies: true,
			kind: decision.Keep, requeue: 5 * time.Second},
		{name: "cut off for a crash loop ran out", mod: all(cutOffForCannotRun, at(10*time.Second)), applies: true,
			kind: decision.Revoke, revocation: fencingv1.ReasonPodCannotRun},
	})

	// Revoked while the container runs again after its back-off: the message still says
	// how it last ended (measured on real nodes: a 10 s back-off outlasts a 4 s lease).
	runningAgain := func(in *decision.Input) {
		in.Holder.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "work", RestartCount: 3,
			State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}}}
	}
	c := clocktesting.NewFakeClock(t0.Add(5 * time.Second))
	got, _ := decision.CutOffRunsOutRule(ruleInput(c, all(cutOffForCannotRun, runningAgain, at(10*time.Second))))
	if want := "container work: restarted; last exit: Error, code 1, 3 restarts"; got.Message != want {
		t.Fatalf("message %q, want %q", got.Message, want)
	}
}

func TestRuleDeleting(t *testing.T) {
	runRuleTable(t, decision.DeletingRule, []ruleCase{
		{name: "not deleting", applies: false},
		{name: "deleting", mod: func(in *decision.Input) { in.FL.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }, applies: true,
			kind: decision.Revoke, revocation: fencingv1.ReasonFencedLeaseDeleted},
	})
}

// Checks A2.
func TestRuleLabelRemoved(t *testing.T) {
	runRuleTable(t, decision.LabelRemovedRule, []ruleCase{
		{name: "labeled", applies: false},
		{name: "label removed", mod: func(in *decision.Input) { delete(in.Holder.Labels, fencingv1.LeaseLabel) }, applies: true,
			kind: decision.Revoke, revocation: fencingv1.ReasonLabelRemoved},
		{name: "label names another FencedLease", mod: func(in *decision.Input) { in.Holder.Labels[fencingv1.LeaseLabel] = "other" }, applies: true,
			kind: decision.Revoke, revocation: fencingv1.ReasonLabelRemoved},
	})
}

func TestRuleExpired(t *testing.T) {
	runRuleTable(t, decision.ExpiredRule, []ruleCase{
		{name: "within the lease", applies: false},
		{name: "a lease after the last observed renewal", mod: at(10 * time.Second), applies: true, kind: decision.Revoke,
			revocation: fencingv1.ReasonLeaseExpired, leaseFirst: true},
		{name: "never renewed: the startup deadline, not the lease", mod: all(neverRenewed, at(10*time.Second)), applies: false},
		{name: "never renewed past the startup deadline", mod: all(neverRenewed, at(20*time.Second)), applies: true, kind: decision.Revoke,
			revocation: fencingv1.ReasonStartupDeadlineExceeded, leaseFirst: true},
		{name: "draining, grace not over", mod: all(handoffAsked(30, t0), at(10*time.Second)), applies: true, kind: decision.Revoke,
			revocation: fencingv1.ReasonLeaseExpired, leaseFirst: true},
		{name: "draining, grace over", mod: all(handoffAsked(1, t0), at(10*time.Second)), applies: true, kind: decision.Revoke,
			revocation: fencingv1.ReasonHandoffTimeout, leaseFirst: true},
	})
}

func TestRuleRevokeRequested(t *testing.T) {
	runRuleTable(t, decision.RevokeRequestedRule, []ruleCase{
		{name: "no request", applies: false},
		{name: "a request for another token", mod: func(in *decision.Input) { in.FL.Annotations = map[string]string{fencingv1.RevokeAnnotation: "2"} }, applies: false},
		{name: "started: cut off, revoked when the lease runs out", mod: revokeAsked, applies: true, kind: decision.CutOff,
			revocation: fencingv1.ReasonRevokeRequested, leaseFirst: true, requeue: 5 * time.Second},
		{name: "never renewed: revoked at once", mod: all(neverRenewed, revokeAsked), applies: true, kind: decision.Revoke,
			revocation: fencingv1.ReasonRevokeRequested, leaseFirst: true},
	})
}

func TestRuleHandoffTimeout(t *testing.T) {
	runRuleTable(t, decision.HandoffTimeoutRule, []ruleCase{
		{name: "not asked", applies: false},
		{name: "grace left", mod: handoffAsked(30, t0), applies: false},
		{name: "grace over: cut off", mod: handoffAsked(5, t0), applies: true, kind: decision.CutOff,
			revocation: fencingv1.ReasonHandoffTimeout, leaseFirst: true, requeue: 5 * time.Second},
	})
}

// Checks H5.
func TestRuleHandoffWithdrawn(t *testing.T) {
	n := pod("n", t0)
	waits := func(in *decision.Input) { in.Pods = append(in.Pods, &n) }
	runRuleTable(t, decision.HandoffWithdrawnRule, []ruleCase{
		{name: "not asked", mod: waits, applies: false},
		{name: "the successor waits", mod: all(handoffAsked(30, t0), waits), applies: false},
		{name: "the successor is gone", mod: handoffAsked(30, t0), applies: true, kind: decision.WithdrawHandoff, requeue: 5 * time.Second},
		{name: "the successor is terminating", mod: all(handoffAsked(30, t0), waits, func(in *decision.Input) {
			in.Pods[len(in.Pods)-1].DeletionTimestamp = ptr.To(metav1.NewTime(t0))
		}), applies: true, kind: decision.WithdrawHandoff, requeue: 5 * time.Second},
		// Grace over: the cut-off has begun (or begins now); nothing is withdrawn.
		{name: "gone after the grace period", mod: handoffAsked(5, t0), applies: false},
	})
}

func TestRuleAskHandoff(t *testing.T) {
	n, w := pod("n", t0), pod("w", t0)
	w.Annotations[fencingv1.StandbyAnnotation] = string(fencingv1.StandbyWarm)
	w.Spec.SchedulingGates = nil
	runRuleTable(t, decision.AskHandoffRule, []ruleCase{
		{name: "no successor", applies: false},
		{name: "a successor waits", mod: func(in *decision.Input) { in.Successor = &n }, applies: true, kind: decision.AskHandoff, requeue: 5 * time.Second},
		{name: "already asked", mod: all(handoffAsked(30, t0), func(in *decision.Input) { in.Successor = &n }), applies: false},
		{name: "a Warm successor is Ready by its own probes: never asked for", mod: func(in *decision.Input) { in.Successor = &w }, applies: false},
	})
}

func TestRuleKeep(t *testing.T) {
	runRuleTable(t, decision.KeepRule, []ruleCase{
		{name: "until the lease could run out", applies: true, kind: decision.Keep, requeue: 5 * time.Second},
		{name: "or the grace period ends", mod: handoffAsked(7, t0.Add(time.Second)), applies: true, kind: decision.Keep, requeue: 3 * time.Second},
		{name: "never renewed: until the startup deadline", mod: neverRenewed, applies: true, kind: decision.Keep, requeue: 15 * time.Second},
	})
}

// The chain's order is the protocol's priority: the first rule that applies decides, and
// the verdict names it.
func TestHolderRulesFirstMatchWins(t *testing.T) {
	c := clocktesting.NewFakeClock(t0.Add(5 * time.Second))
	for _, tc := range []struct {
		mod  func(*decision.Input)
		rule string
	}{
		{nil, "keep"},
		{at(10 * time.Second), "expired"},
		// Gone beats expired: a pod that is gone released, whatever the clock says.
		{all(at(10*time.Second), func(in *decision.Input) { in.Holder = nil }), "released"},
		// A deleted FencedLease revokes before a revoke request cuts off.
		{all(revokeAsked, func(in *decision.Input) { in.FL.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }), "deleting"},
		// And before a cut-off holder waits out its lease: deletion lets go of no holder (D1).
		{all(revokeAsked, cutOffLeaseOf, func(in *decision.Input) { in.FL.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }), "deleting"},
		{all(cutOffLeaseOf, func(in *decision.Input) { in.Holder = nil }), "finish a half-done revocation"},
		// A pod that failed before it ever renewed could not start: not a release.
		{all(neverRenewed, func(in *decision.Input) { in.Holder.Status.Phase = corev1.PodFailed }), "cannot start"},
		{func(in *decision.Input) { in.Holder.Status.Phase = corev1.PodFailed }, "released"},
		// A holder that stopped renewing expires; one whose sidecar renews is cut off.
		{all(crashLooped, at(10*time.Second)), "expired"},
		{crashLooped, "cannot run"},
		{all(crashLooped, cutOffForCannotRun), "cut off, waiting out the lease"},
	} {
		in := ruleInput(c, tc.mod)
		got, ok := decision.HolderRules.Evaluate(in)
		if !ok || got.RuleName != tc.rule || got.Holder.PodName != "a" {
			t.Errorf("rule %q decided (%v), want %q", got.RuleName, ok, tc.rule)
		}
	}
	if in := ruleInput(c, nil); in.State != leaserecord.StateRenewed || !in.Started {
		t.Fatalf("the fixture is a renewed grant: %s started=%v", in.State, in.Started)
	}
}
