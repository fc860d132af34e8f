#!/usr/bin/env bash
# Regenerates storageapi/storagev2 (Go stubs of jaeger.storage.v2: TraceReader, DependencyReader)
# from the .proto files of github.com/jaegertracing/jaeger-idl v0.6.0, the version Jaeger v1.76.0
# (v2.13) uses. The OTLP messages come from go.opentelemetry.io/proto/otlp (a placeholder
# trace.proto satisfies protoc; the generated code imports the real Go package).
#
# Needs protoc 3.21.12 (Debian bookworm: apt-get install protobuf-compiler libprotobuf-dev).
# The Go plugins are pinned below and installed into a temporary GOBIN.
set -euo pipefail

IDL_VERSION=v0.6.0
PROTOC_VERSION="libprotoc 3.21.12"
PROTOC_GEN_GO=google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC=google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2

root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/storageapi/storagev2
pkg=github.com/kelemetry/kelemetry/storageapi/storagev2

if ! command -v protoc >/dev/null; then
	echo "protoc not found: apt-get install protobuf-compiler libprotobuf-dev (want $PROTOC_VERSION)" >&2
	exit 1
fi
if [ "$(protoc --version)" != "$PROTOC_VERSION" ]; then
	echo "warning: $(protoc --version), expected $PROTOC_VERSION; output may differ" >&2
fi
wkt=${PROTOC_INCLUDE:-/usr/include}
[ -f "$wkt/google/protobuf/timestamp.proto" ] || { echo "no google/protobuf/*.proto under $wkt (libprotobuf-dev)" >&2; exit 1; }

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
GOBIN=$bin go install "$PROTOC_GEN_GO"
GOBIN=$bin go install "$PROTOC_GEN_GO_GRPC"

idl=$(cd "$root" && go mod download -json "github.com/jaegertracing/jaeger-idl@$IDL_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
cp "$idl/proto/storage/v2/trace_storage.proto" "$idl/proto/storage/v2/dependency_storage.proto" "$out/proto/storage/v2/"
chmod u+w "$out"/proto/storage/v2/*.proto

m="Mstorage/v2/trace_storage.proto=$pkg;storagev2,Mstorage/v2/dependency_storage.proto=$pkg;storagev2"
PATH=$bin:$PATH protoc -I "$out/proto" -I "$wkt" \
	--go_out="$out" --go_opt=paths=import,module=$pkg,$m \
	--go-grpc_out="$out" --go-grpc_opt=paths=import,module=$pkg,$m \
	storage/v2/trace_storage.proto storage/v2/dependency_storage.proto
