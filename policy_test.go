package kelemetry

import (
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	k8saudit "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"
)

// TestDeployAuditPolicyStrict decodes deploy/audit-policy.yaml into kube-apiserver's own policy
// type refusing unknown fields: kube-apiserver ignores them, so a misplaced key (a namespace list
// inside a resources entry) would silently widen or narrow what is recorded.
func TestDeployAuditPolicyStrict(t *testing.T) {
	data, err := os.ReadFile("deploy/audit-policy.yaml")
	require.NoError(t, err)
	var p k8saudit.Policy
	require.NoError(t, yaml.UnmarshalStrict(data, &p))

	// kube-system's ConfigMaps are recorded at Metadata level, every other ConfigMap with bodies.
	level := func(namespace string) k8saudit.Level {
		for _, r := range p.Rules {
			if len(r.Verbs) > 0 || (len(r.Namespaces) > 0 && !slices.Contains(r.Namespaces, namespace)) {
				continue
			}
			for _, g := range r.Resources {
				if g.Group == "" && slices.Contains(g.Resources, "configmaps") {
					return r.Level
				}
			}
			if len(r.Resources) == 0 {
				return r.Level
			}
		}
		return k8saudit.LevelNone
	}
	require.Equal(t, k8saudit.LevelMetadata, level("kube-system"))
	require.Equal(t, k8saudit.LevelRequestResponse, level("default"))
}
