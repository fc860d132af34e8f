package kelemetry

import (
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"
)

// TestDeployAuditPolicyStrict decodes deploy/audit-policy.yaml into kube-apiserver's own policy
// type refusing unknown fields: kube-apiserver ignores them, so a misplaced key (a namespace list
// inside a resources entry) would silently widen or narrow what is recorded.
func TestDeployAuditPolicyStrict(t *testing.T) {
	data, err := os.ReadFile("deploy/audit-policy.yaml")
	require.NoError(t, err)
	var p auditv1.Policy
	require.NoError(t, yaml.UnmarshalStrict(data, &p))

	// kube-system's ConfigMaps are recorded at Metadata level, every other ConfigMap with bodies.
	level := func(namespace string) auditv1.Level {
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
		return auditv1.LevelNone
	}
	require.Equal(t, auditv1.LevelMetadata, level("kube-system"))
	require.Equal(t, auditv1.LevelRequestResponse, level("default"))
}
