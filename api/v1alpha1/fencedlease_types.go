package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// RevocationPolicy says what happens to a holder pod whose lease expired.
// +kubebuilder:validation:Enum=DeletePod;KeepPod
type RevocationPolicy string

const (
	// DeletePodPolicy deletes the revoked pod (the default).
	DeletePodPolicy RevocationPolicy = "DeletePod"
	// KeepPodPolicy keeps the revoked pod, marked Revoked, for inspection.
	KeepPodPolicy RevocationPolicy = "KeepPod"
)

// StandbyMode says how a candidate pod waits for its grant.
// +kubebuilder:validation:Enum=Cold;Warm
type StandbyMode string

const (
	// StandbyCold keeps a candidate unscheduled behind the scheduling gate until it is
	// granted; its containers start with FENCING_TOKEN set (the default).
	StandbyCold StandbyMode = "Cold"
	// StandbyWarm schedules a candidate and starts its containers at once; its workload
	// waits for the grant itself (fencedlease hold, pkg/holder's StartWhenGranted, or the
	// agent) on a watch of its Lease, and gets its token from there.
	StandbyWarm StandbyMode = "Warm"
)

// FencedLeaseSpec is what the user asks for.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.minFencingToken) || (has(self.minFencingToken) && self.minFencingToken >= oldSelf.minFencingToken)",message="spec.minFencingToken may only increase: tokens up to its old value may already be stored by fenced resources"
type FencedLeaseSpec struct {
	// LeaseDurationSeconds is how long a grant lasts without a renewal observed by the
	// controller. Shorter fails over faster; longer tolerates longer holder pauses.
	// +optional
	// +kubebuilder:default=15
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	LeaseDurationSeconds int32 `json:"leaseDurationSeconds,omitempty"`

	// StartupDeadlineSeconds is how long a granted pod has to renew for the first time:
	// to be scheduled, pull its images and start. Until its first renewal this, not
	// leaseDurationSeconds, bounds the grant, so a slow start is not taken for a dead
	// holder. The default, 300, covers a slow image pull and a busy scheduler; a pod that
	// cannot start at all (unschedulable, a bad image) holds everyone up that long.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	StartupDeadlineSeconds int32 `json:"startupDeadlineSeconds,omitempty"`

	// HandoffGracePeriodSeconds is how long a holder asked to hand off (a newer revision
	// of its own Deployment or StatefulSet is waiting) has to release. After it the
	// holder's renewals are refused, and it is revoked when its lease runs out. The
	// default, 30, is the time Kubernetes gives a pod to shut down
	// (terminationGracePeriodSeconds).
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	HandoffGracePeriodSeconds int32 `json:"handoffGracePeriodSeconds,omitempty"`
	// RevocationDelaySeconds is a lock-delay: after an involuntary revocation (the lease
	// expired or the startup deadline passed, a hand-off timed out, a revoke was requested
	// or the label removed — never a release) the next grant waits this long, so a paused
	// or partitioned holder's late writes to a resource that cannot check tokens have a
	// window to drain before anyone else starts. It is frozen into each revocation
	// (status.lastRevocation.delaySeconds): a change applies from the next revocation on.
	// 0, the default, grants at once. A pod that could not start (PodCannotStart) never
	// ran, and waits for nothing.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	RevocationDelaySeconds int32 `json:"revocationDelaySeconds,omitempty"`

	// RevocationPolicy is applied to a holder whose lease expired.
	// +optional
	// +kubebuilder:default=DeletePod
	RevocationPolicy RevocationPolicy `json:"revocationPolicy,omitempty"`

	// Standby says how candidates wait: Cold (gated, unscheduled, started on grant) or
	// Warm (scheduled and running, their workload waiting for the grant on a watch, so a
	// failover is not a pod start). It is read when a pod is admitted: a change applies to
	// pods created after it, and pods already waiting keep the mode they were admitted in.
	// +optional
	// +kubebuilder:default=Cold
	Standby StandbyMode `json:"standby,omitempty"`

	// Suspend stops new grants while true; a current holder keeps its grant.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// MinFencingToken raises the token floor: every token granted from now on is above
	// it. A current holder keeps its grant and token; status.fencingToken jumps to the
	// floor once no pod holds. It may only increase. Use it after restoring etcd from a
	// backup: set it to the highest token your resources stored.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinFencingToken int64 `json:"minFencingToken,omitempty"`

	// Holders is the number of slots: at most this many pods hold a grant at once, one
	// per slot (0 to holders-1), each granted, renewed, revoked and handed off as a single
	// grant is, under its own Lease. Omitted means 1: one grant, as before there were
	// slots. Raising it grants the new slots at once; lowering it asks the holders of the
	// removed slots to hand off (their pods are marked Draining) and cuts them off when
	// the grace period ends. At most 100: the status lists every slot and every grant
	// rewrites it, so a larger set is better split into several FencedLeases.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Holders int32 `json:"holders,omitempty"`

	// SlotAssignment says which slot a waiting pod is granted: Any (the default) — the
	// lowest free slot, oldest pod first — or Ordinal: a StatefulSet pod's index is its
	// slot (the apps.kubernetes.io/pod-index label), and it waits for that slot alone, so
	// a shard's local state stays with its ordinal. A pod without an index, or with one
	// outside the slots, is never granted under Ordinal.
	// +optional
	SlotAssignment SlotAssignment `json:"slotAssignment,omitempty"`
}

// SlotAssignment says which slot a waiting pod is granted.
// +kubebuilder:validation:Enum=Any;Ordinal
type SlotAssignment string

const (
	// SlotAssignmentAny grants the lowest free slot to the oldest waiting pod.
	SlotAssignmentAny SlotAssignment = "Any"
	// SlotAssignmentOrdinal grants slot k only to the StatefulSet pod of index k.
	SlotAssignmentOrdinal SlotAssignment = "Ordinal"
)

// Holder is the pod that holds the grant.
type Holder struct {
	// PodName is the holder pod's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	PodName string `json:"podName"`

	// PodUID is the holder pod's UID; with Token it is the holder's identity.
	// +required
	PodUID types.UID `json:"podUID"`

	// Token is the fencing token granted to this holder.
	// +required
	// +kubebuilder:validation:Minimum=1
	Token int64 `json:"token"`

	// AcquireTime is when the controller granted the lease.
	// +required
	AcquireTime metav1.MicroTime `json:"acquireTime"`

	// LastRenewTime is the last renewal the controller recorded (its own clock): the first,
	// and then the latest it had seen whenever it wrote the status for another reason. A
	// renewal alone is never written here, so renewals cost the API server nothing; the
	// Lease's spec.renewTime shows the latest.
	// +optional
	LastRenewTime *metav1.MicroTime `json:"lastRenewTime,omitempty"`

	// FirstRenewTime is when the controller first observed the holder renew (its own
	// clock). Until then the grant is starting, bounded by StartupDeadlineSeconds.
	// +optional
	FirstRenewTime *metav1.MicroTime `json:"firstRenewTime,omitempty"`

	// StartupDeadlineSeconds is the startup deadline of this grant, frozen when it was made.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	StartupDeadlineSeconds int32 `json:"startupDeadlineSeconds,omitempty"`

	// LeaseDurationSeconds is the lease duration of this grant, frozen when it was made:
	// a change of spec.leaseDurationSeconds applies from the next grant on, so a holder
	// that renews on time is never cut short.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	LeaseDurationSeconds int32 `json:"leaseDurationSeconds,omitempty"`
	// Handoff, when set, asks the holder to release so that a newer revision of its own
	// workload can take over. The request stands until the grant ends.
	// +optional
	Handoff *Handoff `json:"handoff,omitempty"`
}

// Handoff asks a holder to hand its grant to a newer revision of its own workload.
type Handoff struct {
	// SuccessorName is the waiting pod of the newer revision; it is granted next.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SuccessorName string `json:"successorName"`
	// SuccessorUID is that pod's UID.
	// +required
	SuccessorUID types.UID `json:"successorUID"`
	// RequestTime is when the controller asked for the hand-off (its own clock).
	// +required
	RequestTime metav1.MicroTime `json:"requestTime"`
	// GracePeriodSeconds is spec.handoffGracePeriodSeconds frozen when asked.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	GracePeriodSeconds int32 `json:"gracePeriodSeconds"`
}

// Revocation records a holder whose grant was taken away.
type Revocation struct {
	// PodName is the revoked pod's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	PodName string `json:"podName"`

	// PodUID is the revoked pod's UID.
	// +required
	PodUID types.UID `json:"podUID"`

	// Token is the revoked grant's token.
	// +required
	// +kubebuilder:validation:Minimum=1
	Token int64 `json:"token"`

	// Reason is why the grant was revoked.
	// +required
	Reason RevocationReason `json:"reason"`

	// Message says more where the reason alone does not: for PodCannotStart, what the pod
	// reported (the container and its waiting reason, say).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// Time is when the controller revoked the grant.
	// +required
	Time metav1.MicroTime `json:"time"`

	// DelaySeconds is the lock-delay frozen into this revocation (spec.revocationDelaySeconds
	// when it was made, for an involuntary one): no grant is made until it has passed, on
	// the controller's clock from when it revoked or, for a controller that took over
	// since, from its first look. 0: none.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	DelaySeconds int32 `json:"delaySeconds,omitempty"`

	// NextGrantTime is Time plus DelaySeconds, for people: the earliest next grant. A
	// controller that took over since may wait longer (see DelaySeconds).
	// +optional
	NextGrantTime *metav1.MicroTime `json:"nextGrantTime,omitempty"`
}

// RevocationReason says why a grant was revoked.
// +kubebuilder:validation:Enum=LeaseExpired;StartupDeadlineExceeded;FencedLeaseDeleted;LabelRemoved;HandoffTimeout;RevokeRequested;PodCannotStart;PodCannotRun
type RevocationReason string

const (
	// ReasonLeaseExpired: no renewal was observed for a whole lease duration.
	ReasonLeaseExpired RevocationReason = "LeaseExpired"
	// ReasonStartupDeadlineExceeded: the holder never renewed within the startup deadline.
	// It never ran (pkg/holder and the agent renew before any work starts), so its pod is
	// deleted whatever the revocation policy: kept, it could still start later.
	ReasonStartupDeadlineExceeded RevocationReason = "StartupDeadlineExceeded"
	// ReasonFencedLeaseDeleted: the FencedLease is being deleted.
	ReasonFencedLeaseDeleted RevocationReason = "FencedLeaseDeleted"
	// ReasonLabelRemoved: the holder pod still exists but no longer carries the lease
	// label naming this FencedLease (only possible when the admission policy is bypassed).
	ReasonLabelRemoved RevocationReason = "LabelRemoved"
	// ReasonHandoffTimeout: the holder, asked to hand off, did not release within the
	// grace period. Its renewals were refused from then on, and it was revoked when its
	// lease ran out, so it had stopped (pkg/holder) before the successor was granted.
	ReasonHandoffTimeout RevocationReason = "HandoffTimeout"
	// ReasonRevokeRequested: someone who may edit the FencedLease asked to revoke this
	// grant (RevokeAnnotation). As with HandoffTimeout, its renewals were refused from the
	// request on and it was revoked when its lease ran out.
	ReasonRevokeRequested RevocationReason = "RevokeRequested"
	// ReasonPodCannotStart: before its first renewal the granted pod reported that it
	// cannot start (an image pull back-off, a crash loop, a bad container config, phase
	// Failed) or stayed unschedulable for 60 s of the operator's clock. It is revoked at once and
	// deleted whatever the policy: it never ran.
	ReasonPodCannotStart RevocationReason = "PodCannotStart"
	// ReasonPodCannotRun: after it renewed, a container of the holder pod reported that it
	// cannot run (a crash loop, repeated OOM kills, a bad config on restart) while the pod
	// kept renewing (its agent sidecar). As with RevokeRequested, its renewals were refused
	// from then on, and it was revoked when its lease ran out. A single restart is not this.
	ReasonPodCannotRun RevocationReason = "PodCannotRun"
)

// ReleaseReason says why a grant ended without fault (a revocation takes it away). It is
// the reason of the Released event and the label of fencedlease_releases_total.
type ReleaseReason string

const (
	// ReleasePodFinished: the holder pod succeeded or failed.
	ReleasePodFinished ReleaseReason = "PodFinished"
	// ReleasePodDeleted: the holder pod is gone.
	ReleasePodDeleted ReleaseReason = "PodDeleted"
	// ReleaseLeaseReleased: the holder cleared holderIdentity on its own Lease.
	ReleaseLeaseReleased ReleaseReason = "LeaseReleased"
)

// FencedLeaseStatus is what the controller observed and decided.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.fencingToken) || (has(self.fencingToken) && self.fencingToken >= oldSelf.fencingToken)",message="status.fencingToken may never decrease"
// +kubebuilder:validation:XValidation:rule="!has(self.holder) || (has(self.fencingToken) && self.holder.token <= self.fencingToken)",message="status.holder.token may not exceed status.fencingToken"
// +kubebuilder:validation:XValidation:rule="!has(self.slots) || self.slots.all(s, !has(s.holder) || (has(self.fencingToken) && s.holder.token <= self.fencingToken))",message="a slot's holder token may not exceed status.fencingToken"
// +kubebuilder:validation:XValidation:rule="!has(self.slots) || !has(self.holder)",message="status.holder is unset while status.slots lists the slots"
type FencedLeaseStatus struct {
	// FencingToken is the highest token ever issued for this namespace/name. It never
	// decreases, also across deletion and re-creation of the FencedLease.
	// +optional
	// +kubebuilder:validation:Minimum=0
	FencingToken int64 `json:"fencingToken"`

	// Holder is the pod that holds the grant, if any.
	// +optional
	Holder *Holder `json:"holder,omitempty"`

	// Waiting is the number of candidate pods waiting for a grant.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Waiting int32 `json:"waiting"`

	// Transitions counts grants.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Transitions int64 `json:"transitions"`

	// Revocations counts revoked grants.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Revocations int64 `json:"revocations"`

	// LastRevocation is the most recent revocation.
	// +optional
	LastRevocation *Revocation `json:"lastRevocation,omitempty"`

	// ObservedGeneration is the spec generation this status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Slots lists the slots of a FencedLease with spec.holders above 1 (and of one that
	// had slots and was lowered to 1: it keeps listing its one slot), each with its holder
	// and last revocation; a slot removed by lowering spec.holders is listed until its
	// holder has drained. There holder and lastRevocation above are unset; fencingToken,
	// transitions and revocations count across all slots.
	// +optional
	// +listType=map
	// +listMapKey=slot
	// +kubebuilder:validation:MaxItems=100
	Slots []Slot `json:"slots,omitempty"`

	// Holding is "held/holders" (for example 2/3) for a FencedLease with slots: how many
	// slots a pod holds, out of spec.holders.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Holding string `json:"holding,omitempty"`

	// Conditions: Held says whether a pod holds the grant and, if not, why; Ready says
	// whether the FencedLease works as its spec asks (held by a pod that has renewed,
	// idle with nobody waiting, or suspended), for GitOps tools and kubectl wait.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// Slot is one slot of a FencedLease with spec.holders above 1.
// +kubebuilder:validation:XValidation:rule="!has(self.holder) || !has(self.lastRevocation) || self.holder.token > self.lastRevocation.token",message="a slot's holder must hold a newer token than the slot's last revocation"
type Slot struct {
	// Slot is the slot's index, from 0.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=99
	Slot int32 `json:"slot"`

	// Holder is the pod that holds this slot, if any.
	// +optional
	Holder *Holder `json:"holder,omitempty"`

	// LastRevocation is this slot's most recent revocation.
	// +optional
	LastRevocation *Revocation `json:"lastRevocation,omitempty"`

	// LastToken is the token of the last grant the status recorded for this slot, held
	// or ended. The slot's Lease naming a grant above it carries one the status has not
	// recorded yet (a hand-over, or a grant made on the Lease first); one at or below it
	// is recorded already, also once it was released and its pod is gone.
	// +optional
	// +kubebuilder:validation:Minimum=0
	LastToken int64 `json:"lastToken,omitempty"`
}

// Condition types and reasons.
const (
	// ConditionHeld is True while a pod holds the grant.
	ConditionHeld = "Held"

	// Held=True
	ReasonGranted = "Granted"
	// Held=False
	ReasonNoCandidates = "NoCandidates"
	ReasonSuspended    = "Suspended"
	ReasonDeleting     = "Deleting"
	// ReasonLeaseConflict: a Lease of the FencedLease's name exists that the operator did
	// not create (it lacks the lease label); the operator touches nothing until it is gone.
	ReasonLeaseConflict = "LeaseConflict"
	// ReasonTokensExhausted: the highest token is the int64 limit; no token is left to grant.
	ReasonTokensExhausted = "TokensExhausted"
	// ReasonRevocationDelayed: pods wait, and the next grant waits out the lock-delay of
	// the last revocation (status.lastRevocation.delaySeconds, nextGrantTime).
	ReasonRevocationDelayed = "RevocationDelayed"

	// ConditionReady is True while the FencedLease works as its spec asks: a pod holds the
	// grant and has renewed, or nobody is waiting, or it is suspended. It is False, with
	// Held's reason, while it is being deleted, blocked by a foreign Lease or out of
	// tokens, and while a granted pod has not renewed yet.
	ConditionReady = "Ready"

	// Ready=True
	ReasonHeld = "Held"
	ReasonIdle = "Idle"
	// ReasonSuspended also, as above.
	// Ready=False, besides Held's Deleting, LeaseConflict and TokensExhausted:
	// ReasonHolderStarting: the granted pod has not renewed for the first time yet.
	ReasonHolderStarting = "HolderStarting"
	// ReasonWaiting: pods wait and nobody holds the grant (only until the next grant).
	ReasonWaiting = "Waiting"
)

// FencedLease grants one labeled pod at a time a lease and a strictly increasing
// fencing token for one protected side effect.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fl,categories=fencing
// +kubebuilder:printcolumn:name="Holder",type=string,JSONPath=`.status.holder.podName`
// +kubebuilder:printcolumn:name="Token",type=integer,JSONPath=`.status.fencingToken`
// +kubebuilder:printcolumn:name="Waiting",type=integer,JSONPath=`.status.waiting`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Holders",type=string,JSONPath=`.status.holding`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Renewed",type=date,JSONPath=`.status.holder.lastRenewTime`,priority=1,description="The last renewal recorded in status; a renewal alone writes no status, so a live holder has renewed since (the Lease's renewTime has the latest)."
// +kubebuilder:printcolumn:name="Duration",type=integer,JSONPath=`.spec.leaseDurationSeconds`,priority=1
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.revocationPolicy`,priority=1
// +kubebuilder:printcolumn:name="Standby",type=string,JSONPath=`.spec.standby`,priority=1
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`,priority=1
// +kubebuilder:printcolumn:name="Transitions",type=integer,JSONPath=`.status.transitions`,priority=1
// +kubebuilder:printcolumn:name="Revocations",type=integer,JSONPath=`.status.revocations`,priority=1
// +kubebuilder:printcolumn:name="Held",type=string,JSONPath=`.status.conditions[?(@.type=="Held")].reason`,priority=1
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name may be at most 63 characters: candidate pods name their FencedLease in the label fencing.fencedlease.io/lease, and a label value is at most 63 characters, so no pod could ever be a candidate"
type FencedLease struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	// +kubebuilder:default={}
	Spec FencedLeaseSpec `json:"spec,omitempty"`
	// +optional
	Status FencedLeaseStatus `json:"status,omitempty"`
}

// FencedLeaseList is a list of FencedLeases.
// +kubebuilder:object:root=true
type FencedLeaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FencedLease `json:"items"`
}
