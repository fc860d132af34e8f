#!/usr/bin/env bash
# Counts the exported names the module promises to its users (internal/tools/apisurface): exported
# types, functions, methods of exported types, variables, constants, struct fields and interface
# methods in non-test, non-generated files outside internal/, examples/, e2e/ and testdata/.
#   ./scripts/api-surface.sh            the total
#   ./scripts/api-surface.sh -v         the count of each package too
#   ./scripts/api-surface.sh -names     every name
#   ./scripts/api-surface.sh -max N     fail when the total is above N (scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./internal/tools/apisurface "$@"
