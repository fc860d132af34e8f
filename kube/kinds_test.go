package kube_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kelemetry/kelemetry/kube"
)

func TestIsObjectKind(t *testing.T) {
	for _, tc := range []struct {
		kind string
		want bool
	}{
		{"Pod", true},
		{"Deployment", true},
		{"ConfigMap", true},
		{"", true},
		{"Status", false},
		{"Scale", false},
		{"Eviction", false},
		{"Binding", false},
		{"TokenRequest", false},
		{"DeleteOptions", false},
		{"List", false},
		{"WatchEvent", false},
		{"Table", false},
		{"PartialObjectMetadata", false},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			assert.Equal(t, tc.want, kube.IsObjectKind(tc.kind))
		})
	}
}
