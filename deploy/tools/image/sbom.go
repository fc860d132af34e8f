package image

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// SBOMPath is where the image keeps its software bill of materials (SPDX 2.3, JSON).
const SBOMPath = "/usr/share/sbom/kelemetry.spdx.json"

// spdxDocument is the part of SPDX 2.3 the SBOM uses.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID           string            `json:"SPDXID"`
	Name             string            `json:"name"`
	VersionInfo      string            `json:"versionInfo"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
}

type spdxExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]`)

// SBOM describes the Go binary as an SPDX 2.3 document: the main module at the image's version,
// every module compiled in (from the binary's build information) and the
// Go toolchain, each with a package URL. It is reproducible: the creation time is o.Created.
func SBOM(binary []byte, o Options) ([]byte, error) {
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		return nil, fmt.Errorf("image: SBOM: the binary carries no Go build information: %w", err)
	}
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0).UTC()
	}
	pkg := func(path, version string) spdxPackage {
		p := spdxPackage{
			SPDXID: "SPDXRef-Package-" + spdxIDUnsafe.ReplaceAllString(path+"-"+version, "-"), Name: path, VersionInfo: version,
			DownloadLocation: "NOASSERTION",
			ExternalRefs:     []spdxExternalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: "pkg:golang/" + path + "@" + version}},
		}
		return p
	}
	main := pkg(info.Main.Path, o.Version)
	main.DownloadLocation = "https://" + info.Main.Path
	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              "kelemetry-" + o.Version,
		DocumentNamespace: "https://github.com/kelemetry/kelemetry/sbom/" + o.Version + "-" + o.Commit,
		CreationInfo:      spdxCreationInfo{Created: o.Created.UTC().Format(time.RFC3339), Creators: []string{"Tool: kelemetry-buildimage"}},
		Packages:          []spdxPackage{main},
		Relationships:     []spdxRelationship{{SPDXElementID: "SPDXRef-DOCUMENT", RelationshipType: "DESCRIBES", RelatedSPDXElement: main.SPDXID}},
	}
	goPkg := spdxPackage{SPDXID: "SPDXRef-Package-golang", Name: "go", VersionInfo: strings.TrimPrefix(info.GoVersion, "go"),
		DownloadLocation: "https://go.dev/dl/", ExternalRefs: []spdxExternalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
			ReferenceLocator: "pkg:golang/stdlib@" + info.GoVersion}}}
	doc.Packages = append(doc.Packages, goPkg)
	doc.Relationships = append(doc.Relationships, spdxRelationship{SPDXElementID: main.SPDXID, RelationshipType: "DEPENDS_ON", RelatedSPDXElement: goPkg.SPDXID})
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		p := pkg(d.Path, d.Version)
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{SPDXElementID: main.SPDXID, RelationshipType: "DEPENDS_ON", RelatedSPDXElement: p.SPDXID})
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("image: SBOM: %w", err)
	}
	return append(out, '\n'), nil
}

// BuildIndex builds the image for each architecture (GOARCH: amd64, arm64, ...) and puts them in
// one multi-architecture OCI image index, each manifest with its platform.
func BuildIndex(ctx context.Context, o Options, arches []string) (v1.ImageIndex, error) {
	if len(arches) == 0 {
		return nil, fmt.Errorf("image: no architecture to build")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range arches {
		oa := o
		oa.Arch = arch
		img, err := Build(ctx, oa)
		if err != nil {
			return nil, fmt.Errorf("image: %s: %w", arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1, Platform: &v1.Platform{OS: "linux", Architecture: arch},
		}})
	}
	return idx, nil
}

// WriteLayoutIndex writes idx as an OCI image layout in dir (created or appended to), its
// reference name recorded in the org.opencontainers.image.ref.name annotation.
func WriteLayoutIndex(dir, ref string, idx v1.ImageIndex) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return fmt.Errorf("image: OCI layout %s: %w", dir, err)
		}
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return fmt.Errorf("image: OCI layout %s: %w", dir, err)
	}
	return nil
}
