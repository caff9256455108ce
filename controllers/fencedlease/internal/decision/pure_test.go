package decision

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTheDecisionReachesNoClient keeps the package pure: nothing it imports, directly or
// not, can talk to the API server or to controller-runtime. The shell
// (controllers/fencedlease) does the I/O.
func TestTheDecisionReachesNoClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{"sigs.k8s.io/controller-runtime", "k8s.io/client-go"}
	for dep := range strings.FieldsSeq(string(out)) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("the decision package depends on %s", dep)
			}
		}
	}
}
