package bench

import (
	"fmt"
	"strconv"

	"github.com/fencedlease/fencedlease/test/testenv"
)

// queueSample is the operator's work queue and workers at one scrape: the reconciles
// running, and the FencedLeases ready in the queue at each priority.
type queueSample struct {
	active int
	// ready maps a priority (0 normal, -100 follow-up) to the items ready at it.
	ready map[int]int
}

// parseQueueSample reads controller's series from a /metrics page: its active workers
// (controller_runtime_active_workers) and its queue depth by priority (workqueue_depth,
// which the priority queue labels with priority).
func parseQueueSample(page, controller string) (queueSample, error) {
	s := queueSample{ready: map[int]int{}}
	families, err := testenv.ParseMetrics(page)
	if err != nil {
		return s, err
	}
	for _, m := range families["controller_runtime_active_workers"].GetMetric() {
		if testenv.Labels(m)["controller"] == controller {
			s.active = int(m.GetGauge().GetValue())
		}
	}
	for _, m := range families["workqueue_depth"].GetMetric() {
		labels := testenv.Labels(m)
		if p, err := strconv.Atoi(labels["priority"]); err == nil && labels["name"] == controller {
			s.ready[p] += int(m.GetGauge().GetValue())
		}
	}
	return s, nil
}

func (s queueSample) String() string {
	return fmt.Sprintf("%d reconciles running, %d ready at normal priority, %d at follow-up", s.active, s.ready[0], s.ready[-100])
}
