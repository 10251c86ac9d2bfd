package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
	_ "time/tzdata" // the time tool must know every IANA zone, even on a bare host

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits of the slow tool: enough for demos and tests, small enough that a
// careless call cannot tie the server up for hours or flood the client.
const (
	maxSlowSeconds = 600
	maxSlowSteps   = 1000
	defaultSteps   = 10
)

// tools holds what the tool handlers share: a logger and a clock that tests
// can fix.
type tools struct {
	logger *slog.Logger
	now    func() time.Time
}

// newServer returns the example server with every tool registered.
func newServer(logger *slog.Logger, now func() time.Time) *mcp.Server {
	t := &tools{logger: logger, now: now}
	server := mcp.NewServer(&mcp.Implementation{
		Name:    "tether-example-server",
		Title:   "tether example server",
		Version: version,
	}, &mcp.ServerOptions{
		Instructions: "A small server shipped with tether for examples and tests. " +
			"Tools: echo, add, time, slow (reports progress, honours cancellation), fail (always a tool error).",
		// Only tools: the go-sdk would otherwise advertise logging, which this
		// server never sends.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	server.AddReceivingMiddleware(t.logCalls)
	mcp.AddTool(server, &mcp.Tool{
		Name:        "echo",
		Description: "Return the given text unchanged.",
	}, t.echo)
	mcp.AddTool(server, &mcp.Tool{
		Name:        "add",
		Description: "Add two numbers.",
	}, t.add)
	mcp.AddTool(server, &mcp.Tool{
		Name:        "time",
		Description: "Return the current time in RFC 3339 form, in UTC or in the given IANA time zone.",
	}, t.time)
	mcp.AddTool(server, &mcp.Tool{
		Name: "slow",
		Description: "Take the given number of seconds, in steps. Sends a progress notification after each step " +
			"when the call carries a progressToken; stops as soon as the call is cancelled.",
	}, t.slow)
	mcp.AddTool(server, &mcp.Tool{
		Name:        "fail",
		Description: "Always fail with a tool error (isError: true) carrying the given message.",
	}, t.fail)
	return server
}

// logCalls logs every tools/call at debug level. Other methods are not
// logged: a client's health checks (ping, tools/list) would otherwise add a
// line to stderr at every interval. Arguments are not logged either: they
// may carry anything.
func (t *tools) logCalls(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if !ok {
			return next(ctx, method, req)
		}
		start := time.Now()
		res, err := next(ctx, method, req)
		attrs := []any{"tool", call.Params.Name, "duration", time.Since(start)}
		if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
			attrs = append(attrs, "toolError", true)
		}
		if err != nil {
			attrs = append(attrs, "error", err)
		}
		t.logger.Debug("tool call", attrs...)
		return res, err
	}
}

type echoInput struct {
	Text string `json:"text" jsonschema:"the text to send back"`
}

func (t *tools) echo(_ context.Context, _ *mcp.CallToolRequest, in echoInput) (*mcp.CallToolResult, any, error) {
	return textResult(in.Text), nil, nil
}

type addInput struct {
	A float64 `json:"a" jsonschema:"the first addend"`
	B float64 `json:"b" jsonschema:"the second addend"`
}

type addOutput struct {
	Sum float64 `json:"sum" jsonschema:"a + b"`
}

func (t *tools) add(_ context.Context, _ *mcp.CallToolRequest, in addInput) (*mcp.CallToolResult, addOutput, error) {
	sum := in.A + in.B
	return textResult(strconv.FormatFloat(sum, 'g', -1, 64)), addOutput{Sum: sum}, nil
}

type timeInput struct {
	Timezone string `json:"timezone,omitempty" jsonschema:"an IANA time zone such as Europe/Paris; UTC when empty"`
}

type timeOutput struct {
	Time     string `json:"time" jsonschema:"the current time, RFC 3339"`
	Timezone string `json:"timezone" jsonschema:"the time zone used"`
}

func (t *tools) time(_ context.Context, _ *mcp.CallToolRequest, in timeInput) (*mcp.CallToolResult, timeOutput, error) {
	zone := in.Timezone
	if zone == "" {
		zone = "UTC"
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, timeOutput{}, fmt.Errorf("unknown time zone %q", zone)
	}
	now := t.now().In(loc).Format(time.RFC3339)
	return textResult(now), timeOutput{Time: now, Timezone: zone}, nil
}

type slowInput struct {
	Seconds float64 `json:"seconds" jsonschema:"how long the call takes in total, 0 to 600"`
	Steps   int     `json:"steps,omitempty" jsonschema:"how many steps (and progress notifications), 1 to 1000; default 10"`
}

func (t *tools) slow(ctx context.Context, req *mcp.CallToolRequest, in slowInput) (*mcp.CallToolResult, any, error) {
	steps := in.Steps
	if steps == 0 {
		steps = defaultSteps
	}
	if in.Seconds < 0 || in.Seconds > maxSlowSeconds {
		return nil, nil, fmt.Errorf("seconds must be between 0 and %d, got %g", maxSlowSeconds, in.Seconds)
	}
	if steps < 1 || steps > maxSlowSteps {
		return nil, nil, fmt.Errorf("steps must be between 1 and %d, got %d", maxSlowSteps, steps)
	}
	token := req.Params.GetProgressToken()
	total := time.Duration(in.Seconds * float64(time.Second))
	start := time.Now()
	for i := 1; i <= steps; i++ {
		// Each step ends at a fixed offset from the start, so the time spent
		// sending notifications does not add up over many steps.
		if err := sleep(ctx, time.Until(start.Add(total*time.Duration(i)/time.Duration(steps)))); err != nil {
			t.logger.Info("slow call cancelled", "step", i-1, "steps", steps, "cause", context.Cause(ctx))
			return nil, nil, err
		}
		if token == nil {
			continue
		}
		err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      float64(i),
			Total:         float64(steps),
			Message:       fmt.Sprintf("step %d of %d", i, steps),
		})
		if err != nil {
			// Progress is advisory: a client that cannot take it still gets
			// its result.
			t.logger.Debug("progress notification not sent", "step", i, "error", err)
		}
	}
	return textResult(fmt.Sprintf("done: %d steps in %s", steps, total)), nil, nil
}

type failInput struct {
	Message string `json:"message,omitempty" jsonschema:"the error text; a fixed text when empty"`
}

func (t *tools) fail(_ context.Context, _ *mcp.CallToolRequest, in failInput) (*mcp.CallToolResult, any, error) {
	msg := in.Message
	if msg == "" {
		msg = "failed, as asked"
	}
	// A handler error becomes a tool error (isError: true), not a protocol error.
	return nil, nil, errors.New(msg)
}

// sleep waits for d or until ctx ends, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
