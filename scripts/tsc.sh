#!/usr/bin/env bash
# Type checks of the web UI's JavaScript (frontend/ui/static, configuration: its tsconfig.json):
# tsc reads the JSDoc types and emits nothing; the UI has no build step. The pinned TypeScript
# is installed from npm into the tools cache ($KELEMETRY_TOOLS, default
# ${XDG_CACHE_HOME:-~/.cache}/kelemetry-tools) on first use, then reused. Needs node and npm.
set -euo pipefail
cd "$(dirname "$0")/.."

version=5.9.3
tools="${KELEMETRY_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/kelemetry-tools}"
dir="$tools/typescript-$version"
tsc="$dir/node_modules/typescript/bin/tsc"
if [ ! -f "$tsc" ]; then
	if ! command -v npm >/dev/null 2>&1; then
		echo "tsc: npm and node are needed to install typescript (Debian: apt-get install npm)" >&2
		exit 1
	fi
	echo "tsc: installing typescript $version into $dir"
	mkdir -p "$tools"
	tmp=$(mktemp -d "$tools/.typescript-$version.XXXXXX")
	npm install --prefix "$tmp" --no-save --no-audit --no-fund "typescript@$version" >/dev/null
	rm -rf "$dir"
	mv "$tmp" "$dir"
fi
node "$tsc" -p frontend/ui/static "$@"
