// Package admissioncheck verifies that the admission policies the operator's guarantees
// rest on are installed, bound, and recognize this operator. Without them an ordinary
// editor can forge tokens, ungate pods or steal Leases; with a parameter that names
// someone else, the policies deny the operator its own writes. Either way the operator
// keeps running (the policies are installed apart from it, and may come later) but says
// so plainly: a log line, a Warning event, and the gauge
// fencedlease_admission_policy_ready{policy} at 0.
package admissioncheck
