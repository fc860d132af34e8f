// Package remotelinker runs linkers in their own process: the aggregator sends a link job (the
// object's reference and body) over NATS and gets the links back, so a linker written with the
// SDK runs as its own Deployment, scaled and updated without rebuilding Kelemetry.
//
//   - Client is an aggregator.Linker (and aggregator.IsolatedLinker) that sends each Lookup as a
//     NATS request to the linker's subject and decodes the reply. A worker that is down (no
//     responders) or slow (Timeout) costs only this linker's links: the aggregator runs it on
//     link workers of its own, in-flight requests are bounded, and every outcome is counted.
//   - Worker (and Serve) is the other side: it subscribes to the subject in a queue group, so
//     that workers scale horizontally and share the jobs, runs a user's aggregator.Linker with
//     bounded concurrency, answers every request with links or an error, and drains on Stop.
//   - wireJob and wireResult are the wire format: JSON with a version (wireVersion); docs/sdk lists
//     its fields for workers written in other languages.
//
// Module wires the clients of Config into fx (the kelemetry.linkers value group); the root
// package's Config has them under remoteLinkers.
package remotelinker
