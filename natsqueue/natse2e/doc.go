// Package natse2e holds the multi-process tests of the NATS audit queue (build tag e2e):
// all-in-one replicas (the real binary, role ingest) consuming from a 3-node JetStream
// cluster embedded in the test process (R3 stream) and writing to a real Jaeger (memory
// backend), with NATS nodes stopped, replicas killed with SIGKILL and everything restarted.
// They are slow (minutes): scripts/e2e.sh runs them with `go test -tags e2e ./natsqueue/natse2e`.
// The package has no code besides its tests.
package natse2e
