package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/exalsius/exalsius-operator/common/valuepath"
)

// TestValuesOverTheLimitsAreDenied: spec.values over a limit of common/valuepath is denied at
// admission naming spec.values and the limit, and the denial does not quote the values.
func TestValuesOverTheLimitsAreDenied(t *testing.T) {
	fixtures(t)
	ctx := context.Background()
	var deep any = "hunter2"
	for range valuepath.MaxValuesDepth + 1 {
		deep = map[string]any{"a": deep}
	}
	wide := map[string]any{}
	for i := range valuepath.MaxValuesLeaves + 1 {
		wide[fmt.Sprintf("k%d", i)] = "hunter2"
	}
	for limit, values := range map[string]map[string]any{
		"depth":  deep.(map[string]any),
		"leaves": wide,
		"size":   {"a": strings.Repeat("hunter2", valuepath.MaxValuesBytes/7+1)},
	} {
		err := mgmt.Client.Create(ctx, deployment("corpus", "over-"+limit, corpusClass, values))
		denied(t, err, "spec.values")
		if !strings.Contains(err.Error(), limit+" limit") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the denial does not name the limit, or quotes the values: %v", limit, err)
		}
	}
}
