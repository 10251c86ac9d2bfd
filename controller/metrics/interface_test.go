package metrics_test

import (
	"testing"

	"github.com/tether-mcp/tether/controller"
	"github.com/tether-mcp/tether/controller/gateway"
	"github.com/tether-mcp/tether/controller/metrics"
)

// The reconciler's interface and the gateway's hook, checked at compile time.
var (
	_ controller.Metrics = (*metrics.Metrics)(nil)
	_                    = gateway.Options{ObserveCall: (*metrics.Metrics)(nil).ObserveCall}
)

// TestCallResultsMatchTheGateway keeps the result label values the gateway
// passes in step with the ones the metrics accept (anything else would be
// counted as error).
func TestCallResultsMatchTheGateway(t *testing.T) {
	for _, c := range [][2]string{
		{gateway.ResultOK, metrics.CallOK},
		{gateway.ResultError, metrics.CallError},
		{gateway.ResultTimeout, metrics.CallTimeout},
		{gateway.ResultCanceled, metrics.CallCanceled},
	} {
		if c[0] != c[1] {
			t.Errorf("gateway result %q, metrics result %q", c[0], c[1])
		}
	}
}
