// Package docgen generates the reference pages under docs/reference from the code and checks the
// Markdown documentation.
//
// The generators read the module's Go source with go/parser and go/ast (LoadModule; no type
// checking, no build): ConfigFields follows the yaml tags of kelemetry.Config and of every struct
// it holds and takes their doc comments (ConfigPage); Metrics finds the instruments the code
// creates with a constant name (MetricsPage); ParseCRD walks the openAPIV3Schema of a
// CustomResourceDefinition (CRDPage); FlagsTable renders a flag.FlagSet (the all-in-one's CLI
// page is rendered by its own test). Golden compares a generated page with the committed one;
// KELEMETRY_UPDATE_DOCS=1 rewrites it:
//
//	KELEMETRY_UPDATE_DOCS=1 go test ./internal/docgen ./cmd/kelemetry -run 'Reference$'
//
// Check is the docs check (TestDocs): relative links and #anchors resolve (GitHub's heading
// slugs), the paths, packages and flags that shell blocks name exist, blocks marked
// <!-- docs:run --> run, YAML blocks of a configuration load (a Helm values block is marked
// <!-- docs:helm-values -->), and the configuration keys named in code spans exist.
// CheckMetricNames checks that the documentation names metrics as /metrics shows them
// (kelemetry_audit_webhook_rejected_total), not by their OpenTelemetry names, and only names that
// are there (TestDocsNameMetricsAsOnMetrics).
package docgen
