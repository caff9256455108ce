package bench

import "testing"

func TestParseQueueSampleReadsWorkersAndDepthByPriority(t *testing.T) {
	page := `# HELP workqueue_depth Current depth of workqueue by workqueue and priority
# TYPE workqueue_depth gauge
workqueue_depth{controller="fencedlease",name="fencedlease",priority="0"} 12
workqueue_depth{controller="fencedlease",name="fencedlease",priority="-100"} 340
workqueue_depth{controller="other",name="other",priority="0"} 99
# TYPE controller_runtime_active_workers gauge
controller_runtime_active_workers{controller="fencedlease"} 16
controller_runtime_active_workers{controller="other"} 3
`
	s, err := parseQueueSample(page, "fencedlease")
	if err != nil {
		t.Fatal(err)
	}
	if s.active != 16 || s.ready[0] != 12 || s.ready[-100] != 340 {
		t.Fatalf("got %+v, want 16 running, 12 normal, 340 follow-up", s)
	}
	if got, want := s.String(), "16 reconciles running, 12 ready at normal priority, 340 at follow-up"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
