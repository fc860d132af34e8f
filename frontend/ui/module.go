package ui

import (
	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/httpserver"
)

// moduleResult are the fx outputs of newModule.
type moduleResult struct {
	fx.Out

	// Handler serves the pages (Register) on the API listener.
	Handler httpserver.Handler `group:"kelemetry.http.api"`
}

// newModule provides the pages' handler for Module; it needs nothing and cannot fail.
func newModule() moduleResult {
	return moduleResult{Handler: httpserver.HandlerFunc(Register)}
}

// Module serves the web UI's pages on the API listener (with httpserver.Module). The pages call
// the APIs of frontend.Module.
var Module = fx.Module("ui", fx.Provide(newModule))
