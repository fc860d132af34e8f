package docgen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// CRDField is a field of a CustomResourceDefinition's openAPIV3Schema.
type CRDField struct {
	// Path is the field's path from the object's root, "[]" after an array of objects.
	Path string
	// Type is the schema type: string, integer (with its format), boolean, object, "array of T",
	// "map of T" (additionalProperties).
	Type     string
	Required bool
	// Constraints are enum, length, item and CEL validation rules, as text.
	Constraints []string
	Description string
}

// CRD is the part of a CustomResourceDefinition the reference shows.
type CRD struct {
	Group, Kind, Plural, Scope string
	Versions                   []CRDVersion
}

// CRDVersion is one version of a CRD.
type CRDVersion struct {
	Name            string
	Served, Storage bool
	Subresources    []string
	PrinterColumns  [][2]string // name, JSONPath
	Fields          []CRDField
}

// ParseCRD reads a CustomResourceDefinition (YAML) and walks the openAPIV3Schema of each version,
// in document order.
func ParseCRD(data []byte) (CRD, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return CRD{}, fmt.Errorf("parse CRD: %w", err)
	}
	if len(root.Content) == 0 {
		return CRD{}, errors.New("parse CRD: empty document")
	}
	doc := root.Content[0]
	if kind := scalar(get(doc, "kind")); kind != "CustomResourceDefinition" {
		return CRD{}, fmt.Errorf("parse CRD: kind %q", kind)
	}
	spec := get(doc, "spec")
	names := get(spec, "names")
	crd := CRD{Group: scalar(get(spec, "group")), Kind: scalar(get(names, "kind")), Plural: scalar(get(names, "plural")), Scope: scalar(get(spec, "scope"))}
	versions := get(spec, "versions")
	if versions == nil || len(versions.Content) == 0 {
		return CRD{}, errors.New("parse CRD: no versions")
	}
	for _, v := range versions.Content {
		ver := CRDVersion{Name: scalar(get(v, "name")), Served: scalar(get(v, "served")) == "true", Storage: scalar(get(v, "storage")) == "true"}
		if sub := get(v, "subresources"); sub != nil {
			for i := 0; i+1 < len(sub.Content); i += 2 {
				ver.Subresources = append(ver.Subresources, sub.Content[i].Value)
			}
		}
		if cols := get(v, "additionalPrinterColumns"); cols != nil {
			for _, c := range cols.Content {
				ver.PrinterColumns = append(ver.PrinterColumns, [2]string{scalar(get(c, "name")), scalar(get(c, "jsonPath"))})
			}
		}
		schema := get(get(v, "schema"), "openAPIV3Schema")
		if schema == nil {
			return CRD{}, fmt.Errorf("parse CRD: version %s has no openAPIV3Schema", ver.Name)
		}
		walkSchema(schema, "", &ver.Fields)
		crd.Versions = append(crd.Versions, ver)
	}
	return crd, nil
}

// walkSchema appends the properties of the object schema s under prefix.
func walkSchema(s *yaml.Node, prefix string, out *[]CRDField) {
	props := get(s, "properties")
	if props == nil {
		return
	}
	required := map[string]bool{}
	if r := get(s, "required"); r != nil {
		for _, n := range r.Content {
			required[n.Value] = true
		}
	}
	for i := 0; i+1 < len(props.Content); i += 2 {
		name, p := props.Content[i].Value, props.Content[i+1]
		path := prefix + name
		f := CRDField{Path: path, Type: schemaType(p), Required: required[name], Description: scalar(get(p, "description")), Constraints: constraints(p)}
		*out = append(*out, f)
		switch {
		case get(p, "properties") != nil:
			walkSchema(p, path+".", out)
		case scalar(get(p, "type")) == "array" && get(get(p, "items"), "properties") != nil:
			items := get(p, "items")
			n := len(*out)
			walkSchema(items, path+"[].", out)
			// The rules of the items are the array's.
			if c := constraints(items); len(c) > 0 {
				(*out)[n-1].Constraints = append((*out)[n-1].Constraints, prefixAll("each item: ", c)...)
			}
		}
	}
}

func prefixAll(p string, list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = p + s
	}
	return out
}

// schemaType renders the type of a schema.
func schemaType(s *yaml.Node) string {
	t := scalar(get(s, "type"))
	if f := scalar(get(s, "format")); f != "" {
		t += " (" + f + ")"
	}
	switch {
	case t == "array":
		return "array of " + schemaType(get(s, "items"))
	case t == "object" && get(s, "additionalProperties") != nil:
		return "map of " + schemaType(get(s, "additionalProperties"))
	case t == "":
		return "any"
	}
	return t
}

// constraints renders the validation keywords of a schema.
func constraints(s *yaml.Node) []string {
	var out []string
	if e := get(s, "enum"); e != nil {
		var vals []string
		for _, n := range e.Content {
			vals = append(vals, strconv.Quote(n.Value))
		}
		out = append(out, "one of "+strings.Join(vals, ", "))
	}
	for _, k := range []struct{ key, text string }{
		{"minLength", "length ≥ %s"}, {"maxLength", "length ≤ %s"},
		{"minItems", "≥ %s items"}, {"maxItems", "≤ %s items"},
		{"minimum", "≥ %s"}, {"maximum", "≤ %s"}, {"pattern", "matches %s"},
	} {
		if v := scalar(get(s, k.key)); v != "" {
			out = append(out, fmt.Sprintf(k.text, v))
		}
	}
	if t := scalar(get(s, "x-kubernetes-list-type")); t != "" {
		lt := "list type " + t
		if keys := get(s, "x-kubernetes-list-map-keys"); keys != nil {
			var ks []string
			for _, n := range keys.Content {
				ks = append(ks, n.Value)
			}
			lt += " (keys " + strings.Join(ks, ", ") + ")"
		}
		out = append(out, lt)
	}
	if v := get(s, "x-kubernetes-validations"); v != nil {
		for _, r := range v.Content {
			msg := scalar(get(r, "message"))
			if msg == "" {
				msg = scalar(get(r, "rule"))
			}
			out = append(out, msg)
		}
	}
	return out
}

// get returns the value of key in the mapping node n, or nil.
func get(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// scalar is the value of a scalar node ("" for nil or another kind).
func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// CRDPage renders docs/reference/linkrule-crd.md from the LinkRule CRD (deploy/crds); a field the
// CRD does not describe takes the doc comment of its Go field in package linkrule.
func CRDPage(m *Module, crdYAML []byte) (string, error) {
	crd, err := ParseCRD(crdYAML)
	if err != nil {
		return "", err
	}
	goFields, err := m.ConfigFields(m.Path+"/linkrule", "LinkRule", "json")
	if err != nil {
		return "", err
	}
	goDoc, goType := map[string]string{}, map[string]string{}
	for _, f := range goFields {
		goDoc[f.Path], goType[f.Path] = f.Doc, f.Type
	}
	var b strings.Builder
	b.WriteString(generatedBy("internal/docgen", "TestLinkRuleCRDReference", CRDPath+" (descriptions) and the doc comments of package linkrule's types (fields the CRD does not describe)"))
	fmt.Fprintf(&b, `# The %s CRD

A %s (%s, %s-scoped, plural `+"`%s`"+`) links the objects its source selects to the objects its
targets name; see [Linking](../concepts/linking.md) for what rules do and how to apply them, and
[examples/linkrules](../../examples/linkrules) for rules to start from. Kelemetry also reads rules
from a folder of YAML files (`+"`--link-rules`"+`, [command line](cli.md)), with the same schema and checks.
Install the CRD with `+"`kubectl apply -f %s`"+` (the Helm chart installs it too).
A field the CRD does not describe is described by the doc comment of its Go field (package
linkrule) or by the Kubernetes type it has.
`, crd.Kind, crd.Kind, crd.Group, strings.ToLower(crd.Scope), crd.Plural, CRDPath)
	for _, v := range crd.Versions {
		fmt.Fprintf(&b, "\n## %s/%s\n\n", crd.Group, v.Name)
		var facts []string
		if v.Served {
			facts = append(facts, "served")
		}
		if v.Storage {
			facts = append(facts, "stored")
		}
		if len(v.Subresources) > 0 {
			facts = append(facts, "subresources: "+strings.Join(v.Subresources, ", "))
		}
		b.WriteString(strings.Join(facts, "; ") + ".\n")
		if len(v.PrinterColumns) > 0 {
			var cols []string
			for _, c := range v.PrinterColumns {
				cols = append(cols, c[0]+" ("+Code(c[1])+")")
			}
			b.WriteString("`kubectl get " + crd.Plural + "` shows " + strings.Join(cols, ", ") + ".\n")
		}
		b.WriteString("\n")
		var rows [][]string
		for _, f := range v.Fields {
			desc := f.Description
			if desc == "" {
				desc = goDoc[f.Path]
			}
			if desc == "" {
				desc = standardDoc(crd, v, f.Path, goType)
			}
			req := ""
			if f.Required {
				req = "yes"
			}
			rows = append(rows, []string{Code(f.Path), Cell(f.Type), req, Cell(strings.Join(f.Constraints, "; ")), Cell(desc)})
		}
		b.WriteString(Table([]string{"field", "type", "required", "constraints", "description"}, rows))
	}
	return b.String(), nil
}

// standardDoc describes a field that neither the CRD nor a Go doc comment describes: the
// Kubernetes fields of every object, and the fields of a Kubernetes type (metav1.Condition).
func standardDoc(crd CRD, v CRDVersion, path string, goType map[string]string) string {
	switch path {
	case "apiVersion":
		return "`" + crd.Group + "/" + v.Name + "`."
	case "kind":
		return "`" + crd.Kind + "`."
	case "metadata":
		return "The object's metadata: its name, labels and annotations (" + strings.ToLower(crd.Scope) + "-scoped: no namespace)."
	}
	for p := path; ; {
		i := strings.LastIndexAny(p, ".")
		if i < 0 {
			return ""
		}
		p = strings.TrimSuffix(p[:i], "[]")
		t := strings.TrimPrefix(strings.TrimPrefix(goType[p], "list of "), "map of ")
		if strings.Contains(t, ".") { // a type from outside the module
			return "As in Kubernetes' " + t + "."
		}
	}
}
