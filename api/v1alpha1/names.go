package v1alpha1

import "strconv"

// The label, annotation and gate names that pods, Leases and users rely on.
const (
	// LeaseLabel on a pod opts it in as a candidate for the FencedLease it names (same
	// namespace). The operator puts it on the coordination Lease too.
	LeaseLabel = "fencing.fencedlease.io/lease"

	// SchedulingGate keeps a candidate pod unscheduled until it is granted.
	SchedulingGate = "fencing.fencedlease.io/grant"

	// TokenAnnotation carries the fencing token (decimal int64) on the granted pod and on
	// the Lease. On the Lease it outlives the FencedLease as the high-water mark.
	TokenAnnotation = "fencing.fencedlease.io/token"

	// StateAnnotation tells where a pod stands; see PodState.
	StateAnnotation = "fencing.fencedlease.io/state"

	// StandbyAnnotation on a candidate pod records the standby mode it waits in: the
	// operator sets it to Warm, from the FencedLease's spec.standby as it is then, in the
	// write that removes a waiting candidate's scheduling gate so it runs while it waits.
	// Admission never sets it (a pod bringing one is refused), nobody else may change
	// it, and a candidate without it is Cold (gated until granted).
	StandbyAnnotation = "fencing.fencedlease.io/standby"

	// HolderUIDAnnotation on the Lease records the holder pod's UID, because a pod name
	// alone can come back (a StatefulSet re-creates pods under the same name).
	HolderUIDAnnotation = "fencing.fencedlease.io/holder-uid"

	// HolderLabel "true" is on the current holder pod only, in both standby modes: the
	// operator sets it in the pod write that grants and removes it in the write that
	// marks the pod Released or Revoked, and nobody else may add, change or remove it. A
	// Service that selects it sends traffic only to the holder.
	HolderLabel = "fencing.fencedlease.io/holder"

	// SlotLabel, on the holder pod of a FencedLease with slots (spec.holders above 1),
	// is the slot it holds, in the same writes as HolderLabel: a Service per shard selects
	// it with HolderLabel. The annotation of the same name carries it to FENCING_SLOT and
	// the downward API file slot. A slot Lease other than slot 0's carries the label too.
	SlotLabel = "fencing.fencedlease.io/slot"
	// SlotAnnotation is the slot the pod holds (decimal), beside TokenAnnotation.
	SlotAnnotation = "fencing.fencedlease.io/slot"

	// SlotRemovedSuccessor is the successor a hand-off names when it was asked because
	// lowering spec.holders removed the holder's slot: no pod follows in that slot.
	SlotRemovedSuccessor = "(slot removed)"

	// SuccessorAnnotation on the Lease names the pod a hand-off goes to. While it is set
	// the holder is asked to release at a safe point (pod state Draining); pkg/holder
	// reads it from every renewal.
	SuccessorAnnotation = "fencing.fencedlease.io/successor"

	// CutOffReasonAnnotation on the Lease says why the operator cleared its holder,
	// written in the same compare-and-swap and removed by the next grant: PodCannotRun
	// for a holder cut off that waits the lease out (the pod's crash loop may pause
	// between back-offs, so no other object says so), or the reason of a revocation made
	// there and then. A restarted operator finishes either for that reason.
	CutOffReasonAnnotation = "fencing.fencedlease.io/cut-off-reason"

	// RevokeAnnotation on a FencedLease asks the operator to revoke the grant with that
	// token (decimal int64), as `kubectl fencedlease revoke` does. The operator clears the
	// Lease at once, so the holder can renew no more, and revokes when the lease the
	// holder last renewed has run out (reason RevokeRequested), so a holder that keeps its
	// own deadline has stopped before the next is granted; a grant that never renewed never
	// ran, and is revoked at once. A token that is not the current holder's asks nothing:
	// a request never reaches a later grant.
	RevokeAnnotation = "fencing.fencedlease.io/revoke-token"

	// Finalizer lets the controller revoke the holder before a FencedLease goes away.
	Finalizer = "fencing.fencedlease.io/revoke-holder"
)

// LeaseFoundCondition is the pod condition the operator sets on a waiting candidate whose
// label names a FencedLease that does not exist (False, reason FencedLeaseNotFound, with
// an event): the pod waits, gated, until the FencedLease is created, and the condition
// turns True (reason FencedLeaseFound).
const LeaseFoundCondition = "fencing.fencedlease.io/FencedLeaseFound"

// Reasons of LeaseFoundCondition.
const (
	ReasonFencedLeaseNotFound = "FencedLeaseNotFound"
	ReasonFencedLeaseFound    = "FencedLeaseFound"
)

// AdmittedCondition is the pod condition the operator sets, False (reason NotAdmitted,
// with a Warning event), on a pod that carries the lease label but that admission never
// made a candidate — created while no admission was in place, such as in the moment
// before the API server loaded the admission policies: it was stored as written, ungated,
// and is never granted.
const AdmittedCondition = "fencing.fencedlease.io/Admitted"

// ReasonNotAdmitted is AdmittedCondition's reason.
const ReasonNotAdmitted = "NotAdmitted"

// PodState is the value of StateAnnotation.
type PodState string

const (
	PodWaiting PodState = "Waiting"
	PodHolding PodState = "Holding"
	// PodDraining is a holder asked to hand off: it still holds the grant and should
	// release at a safe point before the hand-off grace period ends.
	PodDraining PodState = "Draining"
	PodReleased PodState = "Released"
	PodRevoked  PodState = "Revoked"
)

// Names admission (the MutatingAdmissionPolicy fencedlease-candidate, or the pod
// webhook) injects into candidate pods.
const (
	// AgentAnnotation "true" on a pod asks for the renewal agent as a native sidecar.
	AgentAnnotation = "fencing.fencedlease.io/agent"

	// EnvToken is the token, from TokenAnnotation, injected into every candidate: it
	// resolves when a container starts, so it is empty in a container that started before
	// its grant (a Warm standby's: its workload takes the token from fencedlease hold,
	// pkg/holder, the agent or the file token).
	EnvToken          = "FENCING_TOKEN"
	EnvLeaseName      = "FENCING_LEASE_NAME"
	EnvLeaseNamespace = "FENCING_LEASE_NAMESPACE"
	EnvHolderIdentity = "FENCING_HOLDER_IDENTITY"
	// EnvHolderUID is the pod's UID, so a warm pod waiting for its grant tells its own
	// grant from one of an earlier pod of the same name (a StatefulSet re-creates them).
	EnvHolderUID = "FENCING_HOLDER_UID"
	// EnvSlot is the slot the pod holds, from SlotAnnotation, injected into every
	// candidate: it resolves when a container starts, so it is empty in a container that
	// started before its grant (a Warm standby learns its slot from pkg/holder, the agent
	// or the file slot instead), and without slots.
	EnvSlot = "FENCING_SLOT"

	// VolumeName is the downward API volume with files token and state, mounted at
	// VolumeMountPath; the files follow the annotations live.
	VolumeName      = "fencing"
	VolumeMountPath = "/etc/fencing"

	// AgentContainerName is the injected renewal sidecar.
	AgentContainerName = "fencing-agent"

	// AgentVolumeName is the in-memory emptyDir the agent shares with the workload's
	// containers (read-only for them) at AgentMountPath; AgentStateFile is the agent's
	// view of the grant there (JSON: state, token, local deadline), current even when the
	// API server is unreachable. AgentStateAddress serves the same at /state.
	AgentVolumeName   = "fencing-run"
	AgentMountPath    = "/run/fencing"
	AgentStateFile    = AgentMountPath + "/state"
	AgentStateAddress = "127.0.0.1:8031"
)

// SlotLeaseName is the name of the Lease of slot slot of FencedLease name: the
// FencedLease's own name for slot 0 (so a FencedLease without slots keeps its Lease),
// name-slot-N for slot N.
func SlotLeaseName(name string, slot int32) string {
	if slot == 0 {
		return name
	}
	return name + "-slot-" + strconv.Itoa(int(slot))
}
