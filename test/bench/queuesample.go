package bench

import (
	"fmt"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(page))
	if err != nil {
		return s, err
	}
	for _, m := range families["controller_runtime_active_workers"].GetMetric() {
		if label(m, "controller") == controller {
			s.active = int(m.GetGauge().GetValue())
		}
	}
	for _, m := range families["workqueue_depth"].GetMetric() {
		if p, err := strconv.Atoi(label(m, "priority")); err == nil && label(m, "name") == controller {
			s.ready[p] += int(m.GetGauge().GetValue())
		}
	}
	return s, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func (s queueSample) String() string {
	return fmt.Sprintf("%d reconciles running, %d ready at normal priority, %d at follow-up", s.active, s.ready[0], s.ready[-100])
}
