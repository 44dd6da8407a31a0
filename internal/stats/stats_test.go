package stats

import "testing"

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		x    []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		in := append([]float64(nil), c.x...)
		if got := Median(c.x); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.x, got, c.want)
		}
		for i := range in {
			if in[i] != c.x[i] {
				t.Errorf("Median reordered its input: %v, was %v", c.x, in)
			}
		}
	}
}
