package v1

import (
	"math"
	"testing"
)

// TestGPUQuotaCeiling: the guarantee defaults to the limit and never exceeds it; the ceiling is the
// guarantee plus the borrowing limit, at most the limit, whatever the numbers.
func TestGPUQuotaCeiling(t *testing.T) {
	p := func(v int64) *int64 { return &v }
	cases := []struct {
		e                   GPUQuota
		guaranteed, ceiling int64
	}{
		{GPUQuota{Limit: 8}, 8, 8},
		{GPUQuota{Limit: 8, Guaranteed: p(2)}, 2, 8},
		{GPUQuota{Limit: 8, Guaranteed: p(2), BorrowingLimit: p(3)}, 2, 5},
		{GPUQuota{Limit: 8, Guaranteed: p(9)}, 8, 8},
		{GPUQuota{Limit: 8, Guaranteed: p(2), BorrowingLimit: p(math.MaxInt64)}, 2, 8},
		{GPUQuota{Limit: math.MaxInt64, Guaranteed: p(math.MaxInt64 - 1), BorrowingLimit: p(math.MaxInt64)}, math.MaxInt64 - 1, math.MaxInt64},
	}
	for _, tc := range cases {
		if g, c := tc.e.GuaranteedGPUs(), tc.e.Ceiling(); g != tc.guaranteed || c != tc.ceiling {
			t.Errorf("%+v: guaranteed %d, ceiling %d; want %d, %d", tc.e, g, c, tc.guaranteed, tc.ceiling)
		}
	}
}
