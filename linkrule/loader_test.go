package linkrule

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const goodRules = `
apiVersion: kelemetry.io/v1alpha1
kind: LinkRule
metadata: {name: a}
spec:
  source: {resources: [{group: "", resource: pods}]}
  role: parent
  targets: [{resource: secrets, name: object.spec.secretName}]
---
# an empty document
---
apiVersion: kelemetry.io/v1alpha1
kind: LinkRule
metadata: {name: b}
spec:
  source: {resources: [{group: "", resource: pods}]}
  role: child
  targets: [{resource: secrets, name: "'x'"}]
`

func TestParseRules(t *testing.T) {
	rules, err := ParseRules(strings.NewReader(goodRules))
	require.NoError(t, err)
	require.Len(t, rules, 2)
	assert.Equal(t, "a", rules[0].Name)
	assert.Equal(t, "object.spec.secretName", rules[0].Spec.Targets[0].Name)
	assert.Equal(t, "child", rules[1].Spec.Role)

	for _, tt := range []struct{ doc, want string }{
		{"apiVersion: kelemetry.io/v1alpha1\nkind: LinkRule\nmetadata: {name: a}\nspec: {role: parent, targetz: []}", `unknown field "targetz"`},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}", "want kelemetry.io/v1alpha1 LinkRule"},
		{"apiVersion: kelemetry.io/v1alpha1\nkind: LinkRule\nmetadata: [", "document 1"},
	} {
		_, err := ParseRules(strings.NewReader(tt.doc))
		require.Error(t, err, tt.doc)
		assert.Contains(t, err.Error(), tt.want)
	}
}

func TestManagerLoadsAndReloadsDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write("good.yaml", goodRules)
	write("bad-yaml.yaml", "apiVersion: [")
	write("bad-rule.yml", strings.Replace(strings.SplitN(goodRules, "---", 2)[0], "name: a}", "name: c}", 1)+
		"---\n"+strings.NewReplacer("name: a}", "name: d}", "object.spec.secretName", "object.spec.(").Replace(strings.SplitN(goodRules, "---", 2)[0]))
	write("notes.txt", "not a rule")

	l := newLinker(nil, nil, silent)
	m, err := newManager(Config{Dir: dir, ReloadInterval: -1}, l, nil, silent)
	require.NoError(t, err)
	var names []string
	for _, r := range l.rules() {
		names = append(names, r.Name)
	}
	assert.Equal(t, []string{"c", "a", "b"}, names, "the bad YAML file and the rule that does not compile are skipped (sorted by origin, then name)")

	// A changed file is picked up by the reload.
	require.NoError(t, os.Remove(filepath.Join(dir, "bad-rule.yml")))
	require.NoError(t, m.loadDir())
	assert.Len(t, l.rules(), 2)

	_, err = newManager(Config{Dir: filepath.Join(dir, "missing")}, l, nil, silent)
	require.Error(t, err)
	require.NoError(t, m.Stop(t.Context()), "Stop without Start")
}
