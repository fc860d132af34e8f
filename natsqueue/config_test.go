package natsqueue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"ok", Config{URLs: []string{"nats://x"}}, ""},
		{"no urls", Config{}, "urls"},
		{"bad stream", Config{URLs: []string{"n"}, Stream: "a.b"}, "stream"},
		{"bad prefix", Config{URLs: []string{"n"}, SubjectPrefix: "a..b"}, "subjectPrefix"},
		{"replicas", Config{URLs: []string{"n"}, Replicas: 2}, "replicas"},
		{"half cert", Config{URLs: []string{"n"}, TLS: tlsConfig{CertFile: "x"}}, "certFile and keyFile"},
		{"both creds", Config{URLs: []string{"n"}, CredentialsFile: "a", NKeySeedFile: "b"}, "exclusive"},
		{"pinned ttl", Config{URLs: []string{"n"}, PinnedTTL: time.Second}, "pinnedTTL"},
		{"member", Config{URLs: []string{"n"}, Members: 2, Member: 2}, "member"},
		{"missing file", Config{URLs: []string{"n"}, CredentialsFile: "/nonexistent"}, "credentialsFile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	d := Config{}.WithDefaults()
	assert.Equal(t, defaultStream, d.Stream)
	assert.Equal(t, defaultSubjectPrefix, d.SubjectPrefix)
	assert.Equal(t, 16, d.Partitions)
}
