package kelemetry

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/httpservertest"
)

// withTestSecurityFiles points c's certificate, CA and token files (which name paths of a real
// deployment) at generated ones.
func withTestSecurityFiles(t *testing.T, c Config) Config {
	t.Helper()
	dir := t.TempDir()
	f, err := httpservertest.WriteFiles(dir, "ca", "client")
	require.NoError(t, err)
	tokens := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("token\n"), 0o600))
	for _, tc := range []*struct{ CertFile, KeyFile *string }{{&c.AuditTLS.CertFile, &c.AuditTLS.KeyFile}, {&c.HTTPTLS.CertFile, &c.HTTPTLS.KeyFile}, {&c.OTLPTLS.CertFile, &c.OTLPTLS.KeyFile}} {
		if *tc.CertFile != "" {
			*tc.CertFile, *tc.KeyFile = f.ServerCert, f.ServerKey
		}
	}
	for _, ca := range []*string{&c.AuditAuth.ClientCAFile, &c.HTTPAuth.Proxy.ClientCAFile, &c.OTLPAuth.ClientCAFile} {
		if *ca != "" {
			*ca = f.CA
		}
	}
	for _, files := range []*[]string{&c.AuditAuth.TokenFiles, &c.HTTPAuth.TokenFiles, &c.OTLPAuth.TokenFiles} {
		for i := range *files {
			(*files)[i] = tokens
		}
	}
	return c
}

// The deploy example shows the secure setup: both listeners exposed, each over TLS and
// authenticated; without the files it names, Validate says which one is missing.
func TestDeployAllinoneIsSecure(t *testing.T) {
	c, err := LoadConfig(filepath.Join("deploy", "allinone.yaml"))
	require.NoError(t, err)
	assert.True(t, c.AuditTLS.Enabled() && c.HTTPTLS.Enabled(), "both listeners serve TLS")
	assert.NotEmpty(t, c.AuditAuth.ClientCAFile, "the webhook takes kube-apiserver's client certificate")
	assert.True(t, c.HTTPAuth.Enabled(), "the API authenticates")
	err = c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "auditTLS: certificate /etc/kelemetry/tls/audit/tls.crt")
	assert.Contains(t, err.Error(), "httpAuth: tokenFiles: read token file: open /etc/kelemetry/api-tokens")
}

// The webhook kubeconfig example posts over https with a CA and a client certificate.
func TestDeployWebhookKubeconfigUsesTLS(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("deploy", "audit-webhook-kubeconfig.yaml"))
	require.NoError(t, err)
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string `yaml:"server"`
				CA     string `yaml:"certificate-authority"`
			} `yaml:"cluster"`
		} `yaml:"clusters"`
		Users []struct {
			User struct {
				Cert string `yaml:"client-certificate"`
				Key  string `yaml:"client-key"`
			} `yaml:"user"`
		} `yaml:"users"`
	}
	require.NoError(t, yaml.Unmarshal(data, &kc))
	require.Len(t, kc.Clusters, 1)
	require.Len(t, kc.Users, 1)
	assert.Regexp(t, `^https://[^/]+/audit/prod-1$`, kc.Clusters[0].Cluster.Server)
	assert.NotEmpty(t, kc.Clusters[0].Cluster.CA)
	assert.NotEmpty(t, kc.Users[0].User.Cert)
	assert.NotEmpty(t, kc.Users[0].User.Key)
}

// The listeners' security keys reach package httpserver, and their errors name the key.
func TestConfigSecurityFanOut(t *testing.T) {
	dir := t.TempDir()
	f, err := httpservertest.WriteFiles(dir, "ca", "client")
	require.NoError(t, err)
	c := Config{AuditTLS: httpserver.TLSConfig{CertFile: f.ServerCert, KeyFile: f.ServerKey}, AuditAuth: httpserver.AuditAuthConfig{ClientCAFile: f.CA},
		HTTPTLS: httpserver.TLSConfig{CertFile: f.ServerCert, KeyFile: f.ServerKey}, HTTPAuth: httpserver.APIAuthConfig{Proxy: httpserver.ProxyAuthConfig{ClientCAFile: f.CA}}}
	require.NoError(t, c.Validate())
	h := c.http()
	assert.Equal(t, "127.0.0.1:8080", h.AuditAddr)
	assert.Equal(t, "127.0.0.1:16686", h.APIAddr)
	assert.Equal(t, f.CA, h.AuditAuth.ClientCAFile)
	assert.Equal(t, f.ServerCert, h.APITLS.CertFile)
	assert.Equal(t, f.CA, h.APIAuth.Proxy.ClientCAFile)

	c.AuditTLS = httpserver.TLSConfig{}
	assert.ErrorContains(t, c.Validate(), "auditAuth: clientCAFile needs TLS")
}
