package main

import (
	"fmt"
	"slices"
	"time"
)

// sample is the repetitions of one measurement.
type sample []float64

func (s sample) sorted() []float64 { return slices.Sorted(slices.Values(s)) }

// median is the middle repetition (the mean of the two middle ones for an
// even count); medians, not means, because one noisy neighbour must not
// move the result.
func (s sample) median() float64 {
	if len(s) == 0 {
		return 0
	}
	v := s.sorted()
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func (s sample) min() float64 { return slices.Min(s) }
func (s sample) max() float64 { return slices.Max(s) }

// durations is a sample of times in seconds.
func durations(ds ...time.Duration) sample {
	s := make(sample, len(ds))
	for i, d := range ds {
		s[i] = d.Seconds()
	}
	return s
}

// ms formats a sample of seconds as "median (min–max)" in milliseconds.
func (s sample) ms() string {
	if len(s) == 0 {
		return "—"
	}
	return fmt.Sprintf("%s (%s–%s)", msf(s.median()), msf(s.min()), msf(s.max()))
}

func msf(sec float64) string {
	ms := sec * 1000
	switch {
	case ms >= 100:
		return fmt.Sprintf("%.0f ms", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.2f ms", ms)
	}
}

// rate formats a sample of rates as "median (min–max)".
func (s sample) rate() string {
	if len(s) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f (%.0f–%.0f)", s.median(), s.min(), s.max())
}

// pairedRatio is b relative to a measured in the same repetitions: the
// median of the repetitions' own ratios, so that a repetition on a slower
// moment of the machine moves both sides of its ratio together.
func pairedRatio(b, a sample) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return ratio(b, a)
	}
	rs := make(sample, 0, len(a))
	for i := range a {
		if a[i] > 0 {
			rs = append(rs, b[i]/a[i])
		}
	}
	return rs.median()
}

// ratio is how many times slower b is than a, by medians.
func ratio(b, a sample) float64 {
	if a.median() == 0 {
		return 0
	}
	return b.median() / a.median()
}

// repeat runs fn reps times and collects its durations; the first error
// stops it, because a failed repetition has no honest number.
func repeat(reps int, fn func(rep int) (time.Duration, error)) (sample, error) {
	var s sample
	for i := range reps {
		d, err := fn(i)
		if err != nil {
			return nil, fmt.Errorf("repetition %d: %w", i+1, err)
		}
		s = append(s, d.Seconds())
	}
	return s, nil
}
