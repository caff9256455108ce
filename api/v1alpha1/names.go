package v1alpha1

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

	// HolderUIDAnnotation on the Lease records the holder pod's UID, because a pod name
	// alone can come back (a StatefulSet re-creates pods under the same name).
	HolderUIDAnnotation = "fencing.fencedlease.io/holder-uid"

	// Finalizer lets the controller revoke the holder before a FencedLease goes away.
	Finalizer = "fencing.fencedlease.io/revoke-holder"
)

// PodState is the value of StateAnnotation.
type PodState string

const (
	PodWaiting  PodState = "Waiting"
	PodHolding  PodState = "Holding"
	PodReleased PodState = "Released"
	PodRevoked  PodState = "Revoked"
)
