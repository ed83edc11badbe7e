package egresslat

import "testing"

func TestQuantile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // 100 … 1, unsorted
	}
	for _, c := range []struct {
		name string
		xs   []float64
		q    float64
		want float64
	}{
		{"empty", nil, 0.5, 0},
		{"one", []float64{7}, 0.99, 7},
		{"median of odd", []float64{3, 1, 2}, 0.5, 2},
		{"median of even: upper middle", []float64{4, 1, 3, 2}, 0.5, 3},
		{"p50 of 100", hundred, 0.5, 51},
		{"p99 of 100 is the max", hundred, 0.99, 100},
		{"p99 of 200", append(append([]float64{}, hundred...), hundred...), 0.99, 100},
		{"q 0 is the min", hundred, 0, 1},
		{"q 1 is the max", hundred, 1, 100},
		{"q out of range is clamped", []float64{1, 2}, 2, 2},
	} {
		if got := Quantile(c.xs, c.q); got != c.want {
			t.Errorf("%s: Quantile(%v) = %v, want %v", c.name, c.q, got, c.want)
		}
	}
}
