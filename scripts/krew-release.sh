#!/usr/bin/env bash
# Builds kubectl-kelemetry for the platforms of deploy/krew/kelemetry.yaml as krew archives
# (kubectl-kelemetry_<version>_<os>_<arch>.tar.gz, holding the binary and LICENSE when present) and
# writes the krew manifest with their URLs and sha256 digests, all into dist/ (or $DIST).
#   ./scripts/krew-release.sh v0.1.0 https://github.com/kelemetry/kelemetry/releases/download/v0.1.0
# KREW_PLATFORMS="linux/amd64" limits the platforms (the manifest then lists only those).
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: $0 VERSION BASE_URL}
base=${2:?usage: $0 VERSION BASE_URL}
dist=${DIST:-dist}
platforms=${KREW_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
mkdir -p "$dist"
manifest=$(cat deploy/krew/kelemetry.yaml)
manifest=${manifest//'{{VERSION}}'/$version}
manifest=${manifest//'{{BASE_URL}}'/$base}
for p in $platforms; do
	os=${p%/*} arch=${p#*/}
	work=$(mktemp -d)
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "-s -w" -o "$work/kubectl-kelemetry" ./cmd/kubectl-kelemetry
	[ -f LICENSE ] && cp LICENSE "$work/"
	archive="$dist/kubectl-kelemetry_${version}_${os}_${arch}.tar.gz"
	tar -C "$work" -czf "$archive" .
	rm -rf "$work"
	sum=$(sha256sum "$archive" | cut -d' ' -f1)
	manifest=${manifest//"{{SHA256_${os}_${arch}}}"/$sum}
	echo "built $archive ($sum)"
done
if grep -q '{{SHA256_' <<<"$manifest"; then
	# Platforms left out: drop their entries (4 lines each, from the selector).
	manifest=$(awk '/selector:/{keep=1; buf=$0; n=1; next} n>0&&n<4{buf=buf"\n"$0; n++; if(n==4){ if(buf !~ /\{\{SHA256_/) print buf; n=0}; next} {print}' <<<"$manifest")
fi
printf '%s\n' "$manifest" >"$dist/kelemetry.yaml"
echo "wrote $dist/kelemetry.yaml"
