// Package health holds the named readiness checks of an application, the controller-runtime way:
// each package registers checks of what it owns (the aggregator its sinks, the audit pipeline its
// queue) into one fx value group, and package httpserver serves them at GET /readyz (all, or
// ?exclude=name) and GET /readyz/{name} (one), listing each by name. /healthz's status follows
// the same checks.
package health

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/fx"
)

// Check is one named readiness check.
type Check struct {
	// Name names the check in the answers and in /readyz/{name}: lower-case letters, digits and
	// '-' only.
	Name string
	// Func returns nil while what the check covers can do its work, else why not. It must be
	// cheap and bounded: it runs on every probe.
	Func func(ctx context.Context) error
}

// ReadyGroup is the fx value group of readiness checks.
const ReadyGroup = `group:"kelemetry.readyz"`

// AsReady annotates a constructor whose result is a Check so that it joins the readiness checks:
// fx.Provide(health.AsReady(func(q *MyQueue) health.Check { ... })).
func AsReady(ctor any) any {
	return fx.Annotate(ctor, fx.ResultTags(ReadyGroup))
}

// Timeout bounds one check when its caller's context has no earlier deadline.
const Timeout = 5 * time.Second

// Result is the outcome of one check.
type Result struct {
	Name string
	// Err is nil when the check passed.
	Err error
}

// Validate reports checks without a usable or unique name.
func Validate(checks []Check) error {
	seen := map[string]bool{}
	var errs []error
	for _, c := range checks {
		switch {
		case c.Name == "" || strings.Trim(c.Name, "abcdefghijklmnopqrstuvwxyz0123456789-") != "":
			errs = append(errs, fmt.Errorf("health check %q: a name is lower-case letters, digits and '-'", c.Name))
		case seen[c.Name]:
			errs = append(errs, fmt.Errorf("health check %q: registered twice", c.Name))
		case c.Func == nil:
			errs = append(errs, fmt.Errorf("health check %q: no function", c.Name))
		}
		seen[c.Name] = true
	}
	return errors.Join(errs...)
}

// Run runs the checks not excluded, in the order of their names, each bounded by Timeout, and
// returns their results in that order.
func Run(ctx context.Context, checks []Check, exclude ...string) []Result {
	sorted := slices.Clone(checks)
	slices.SortFunc(sorted, func(a, b Check) int { return strings.Compare(a.Name, b.Name) })
	out := make([]Result, 0, len(sorted))
	for _, c := range sorted {
		if slices.Contains(exclude, c.Name) {
			continue
		}
		out = append(out, Result{Name: c.Name, Err: runOne(ctx, c)})
	}
	return out
}

func runOne(ctx context.Context, c Check) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	return c.Func(ctx)
}

// Failed joins the errors of the failed results, each prefixed with its check's name; nil when
// every check passed.
func Failed(results []Result) error {
	var errs []error
	for _, r := range results {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Name, r.Err))
		}
	}
	return errors.Join(errs...)
}
