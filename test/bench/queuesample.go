package bench

import (
	"fmt"
	"strconv"
	"strings"
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
func parseQueueSample(page, controller string) queueSample {
	s := queueSample{ready: map[int]int{}}
	for line := range strings.SplitSeq(page, "\n") {
		name, labels, value, ok := series(line)
		if !ok {
			continue
		}
		switch {
		case name == "controller_runtime_active_workers" && labels["controller"] == controller:
			s.active = int(value)
		case name == "workqueue_depth" && labels["name"] == controller:
			p, err := strconv.Atoi(labels["priority"])
			if err == nil {
				s.ready[p] += int(value)
			}
		}
	}
	return s
}

func (s queueSample) String() string {
	return fmt.Sprintf("%d reconciles running, %d ready at normal priority, %d at follow-up", s.active, s.ready[0], s.ready[-100])
}

// series splits a Prometheus text line `name{k="v",...} value` (labels optional).
func series(line string) (name string, labels map[string]string, value float64, ok bool) {
	if line == "" || strings.HasPrefix(line, "#") {
		return "", nil, 0, false
	}
	sp := strings.LastIndexByte(line, ' ')
	if sp < 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(line[sp+1:], 64)
	if err != nil {
		return "", nil, 0, false
	}
	head := line[:sp]
	labels = map[string]string{}
	if i := strings.IndexByte(head, '{'); i >= 0 && strings.HasSuffix(head, "}") {
		for kv := range strings.SplitSeq(head[i+1:len(head)-1], ",") {
			k, v, found := strings.Cut(kv, "=")
			if found {
				labels[k] = strings.Trim(v, `"`)
			}
		}
		head = head[:i]
	}
	return head, labels, v, true
}
