#!/usr/bin/env bash
# Static checks with golangci-lint (configuration: .golangci.yml). The pinned version is built
# from the Go module proxy into the tools cache ($KELEMETRY_TOOLS, default ~/.cache/kelemetry-tools)
# on first use (a few minutes on 2 cores), then reused.
set -euo pipefail
cd "$(dirname "$0")/.."

version=v2.15.0
tools="${KELEMETRY_TOOLS:-$HOME/.cache/kelemetry-tools}"
bin="$tools/golangci-lint-$version"
if [ ! -x "$bin" ]; then
	echo "lint: building golangci-lint $version into $tools"
	mkdir -p "$tools"
	tmp=$(mktemp -d)
	GOBIN="$tmp" GOFLAGS= go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$version"
	mv "$tmp/golangci-lint" "$bin"
	rmdir "$tmp"
fi
# -tags e2e: the multi-process tests of the root module (natsqueue/natse2e) are checked too.
"$bin" run --build-tags e2e --timeout 20m ./...
