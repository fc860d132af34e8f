// Package kelemetry bundles Kelemetry's parts into one fx application, the one the all-in-one
// binary (cmd/kelemetry) runs: audit sources and queues, the aggregator and its linkers
// (owner references, the parent-link annotation, link rules, linkers in their own process),
// diffs, Kubernetes Events and informer diffs, trace storage, optional OTLP export, kelemetrix's
// metrics of the audit stream, the query APIs, the storage API and the web UI.
//
// Config is the whole application's configuration (YAML as in deploy/allinone.yaml, read by
// LoadConfig; unknown keys are errors), and fans out into the parts' own configurations.
// Module lists the parts' own modules (telemetry, httpserver, kube, store, otlpsink, aggregator,
// audit, kelemetrix, event, linker, linkrule, remotelinker, diff/informer, frontend, ui,
// storageapi); Modules(role) is the same for one role: roleIngest without the query side,
// roleQuery without the ingest side, for replicas that share a store through the jaeger
// backend. A binary can also compose any subset of the parts
// instead (see docs/sdk/compose.md). A platform team's own binary is
//
//	fx.New(
//		kelemetry.Module,
//		fx.Supply(cfg), // a kelemetry.Config
//		fx.Provide(aggregator.AsLinker(NewMyLinker)),
//	).Run()
package kelemetry
