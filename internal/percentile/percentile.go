package percentile

import (
	"math"
	"time"
)

// Of returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value that at least p% of the values
// are less than or equal to. It is always one of the values, never an
// interpolation; it is 0 when sorted is empty.
func Of(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p * float64(n) / 100))
	return sorted[min(max(rank, 1), n)-1]
}
