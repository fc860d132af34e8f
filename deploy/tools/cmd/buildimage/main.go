// Command buildimage builds the container image of Kelemetry's all-in-one without a Docker
// daemon (package image): a static binary on an empty base, non-root, data in /data.
//
//	cd deploy/tools && go run ./cmd/buildimage --version v1.2.3 --out ../../kelemetry-image.tar
//	docker load -i kelemetry-image.tar   # or: crane push kelemetry-image.tar REGISTRY/kelemetry:v1.2.3
//
// With --format oci the output is an OCI image layout directory (skopeo copy oci:DIR ...); with
// --arch amd64,arm64 it is one multi-architecture image index there (crane push DIR REGISTRY/...
// or skopeo copy --all). Each image carries its SBOM (SPDX 2.3) at image.SBOMPath.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kelemetry/kelemetry/deploy/tools/image"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "buildimage:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("buildimage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		src     = fs.String("source", "../..", "root of the kelemetry module")
		ver     = fs.String("version", "devel", "version stamped into the binary and the image labels")
		commit  = fs.String("commit", "", "commit stamped into the binary (default: git rev-parse HEAD of --source)")
		arch    = fs.String("arch", "", "GOARCH of the image (default: this machine's); several, comma-separated (amd64,arm64), build a multi-architecture index (needs --format oci)")
		ca      = fs.String("ca-bundle", "", "PEM CA bundle to include at "+image.CABundlePath+" (for TLS to Jaeger or OTLP endpoints with public CAs)")
		out     = fs.String("out", "kelemetry-image.tar", "output: a tarball for docker/podman load, or an OCI layout directory with --format oci")
		format  = fs.String("format", "tar", `"tar" (docker load) or "oci" (OCI image layout directory)`)
		ref     = fs.String("tag", "", "image reference recorded in the output (default kelemetry:<version>)")
		binOnly = fs.String("binary-only", "", "only build the stamped static binary to this path")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o := image.Options{SourceDir: *src, Version: *ver, Commit: *commit, Arch: *arch, CABundle: *ca}
	if *binOnly != "" {
		return image.BuildBinary(ctx, o, *binOnly)
	}
	if *ref == "" {
		*ref = "kelemetry:" + *ver
	}
	if arches := strings.Split(*arch, ","); len(arches) > 1 {
		if *format != "oci" {
			return fmt.Errorf("--arch %s: a multi-architecture index needs --format oci (docker load takes one architecture)", *arch)
		}
		idx, err := image.BuildIndex(ctx, o, arches)
		if err != nil {
			return err
		}
		if err := image.WriteLayoutIndex(*out, *ref, idx); err != nil {
			return err
		}
		digest, err := idx.Digest()
		if err != nil {
			return fmt.Errorf("digest: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "%s %s (index of %s) written to %s\n", *ref, digest, *arch, *out)
		return err
	}
	img, err := image.Build(ctx, o)
	if err != nil {
		return err
	}
	switch *format {
	case "tar":
		err = image.WriteTarball(*out, *ref, img)
	case "oci":
		err = image.WriteLayout(*out, *ref, img)
	default:
		return fmt.Errorf("--format %q: want tar or oci", *format)
	}
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("digest: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "%s %s written to %s\n", *ref, digest, *out)
	return err
}
