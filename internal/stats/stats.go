// Package stats holds the summary statistics that the library's GPU
// benchmarks and the CLI's timings share.
package stats

import "slices"

// Median is the middle value of x (the mean of the two middle values for
// an even count), 0 for an empty x. x is not modified.
func Median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
