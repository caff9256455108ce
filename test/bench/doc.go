// Package bench measures the operator against client-go leader election on one control
// plane: failover, hand-off, grant latency, throughput, requests per renewal, waiter and
// grant (from the API server's audit log), and the operator's memory at scale.
//
// It is not part of make test: run it with make bench (see docs/performance.md).
package bench
