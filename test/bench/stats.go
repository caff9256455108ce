package bench

import (
	"fmt"
	"slices"
	"time"
)

// sample is a set of measured durations.
type sample []time.Duration

func (s sample) quantile(q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	i := int(q*float64(len(c))+0.5) - 1
	return c[min(max(i, 0), len(c)-1)]
}

// summary is "p50 / p99 / max (n)".
func (s sample) summary() string {
	if len(s) == 0 {
		return "—"
	}
	return fmt.Sprintf("%s / %s / %s (n=%d)", ms(s.quantile(0.5)), ms(s.quantile(0.99)), ms(s.quantile(1)), len(s))
}

func ms(d time.Duration) string {
	switch {
	case d >= 10*time.Second || d <= -10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Second || d <= -time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
}

// ratio is a/b as "×N.NN", or "—" when b is not measured.
func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "—"
	}
	return fmt.Sprintf("×%.2f", a.Seconds()/b.Seconds())
}
