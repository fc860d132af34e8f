// Package storagev2 holds the Go stubs of Jaeger's remote storage API v2 (jaeger.storage.v2:
// TraceReader and DependencyReader), generated from the .proto files of
// github.com/jaegertracing/jaeger-idl v0.6.0 (kept in proto/, Apache-2.0), with the OTLP
// messages of go.opentelemetry.io/proto/otlp. Use it to build clients of Kelemetry's storage API
// server (package storageapi) or of any Jaeger v2 remote storage.
//
// Regenerate with go generate (scripts/gen-jaeger-storage.sh; protoc 3.21.12, protoc-gen-go
// v1.36.12, protoc-gen-go-grpc v1.6.2).
package storagev2

//go:generate ../../scripts/gen-jaeger-storage.sh
