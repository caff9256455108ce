package realnode

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The suite's printed report: what it measured on real containers, printed once at the
// end (docs/operations.md quotes it). Numbers, not assertions: the machine is shared.
var (
	reportMu sync.Mutex
	report   []string
)

func measured(what string, format string, args ...any) {
	reportMu.Lock()
	defer reportMu.Unlock()
	report = append(report, fmt.Sprintf("  %-58s %s", what, fmt.Sprintf(format, args...)))
}

func printReport() {
	reportMu.Lock()
	defer reportMu.Unlock()
	if len(report) > 0 {
		fmt.Printf("realnode: measured on real containers\n%s\n", strings.Join(report, "\n"))
	}
}

// lastRenewal is the renewTime of the Lease of a FencedLease: read just after its holder
// was frozen, the holder's last renewal.
func lastRenewal(t *testing.T, ns, name string) time.Time {
	t.Helper()
	l := &coordinationv1.Lease{}
	must(t, rc.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, l))
	if l.Spec.RenewTime == nil {
		t.Fatalf("Lease %s/%s has no renewTime", ns, name)
	}
	return l.Spec.RenewTime.Time
}
