package httpservertest

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The files form a working chain: the server certificate for 127.0.0.1 and the client
// certificate verify against the ca, each for its use.
func TestWriteFiles(t *testing.T) {
	f, err := WriteFiles(t.TempDir(), "ca", "me")
	require.NoError(t, err)
	pool := x509.NewCertPool()
	caPEM, err := newCA("unused")
	require.NoError(t, err)
	require.NotEmpty(t, caPEM.PEM)
	for _, c := range []struct {
		cert, key string
		usage     x509.ExtKeyUsage
		host      string
	}{{f.ServerCert, f.ServerKey, x509.ExtKeyUsageServerAuth, "127.0.0.1"}, {f.ClientCert, f.ClientKey, x509.ExtKeyUsageClientAuth, ""}} {
		pair, err := tls.LoadX509KeyPair(c.cert, c.key)
		require.NoError(t, err)
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		require.NoError(t, err)
		roots := x509.NewCertPool()
		rootPEM, err := readFile(f.CA)
		require.NoError(t, err)
		require.True(t, roots.AppendCertsFromPEM(rootPEM))
		_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: c.host, KeyUsages: []x509.ExtKeyUsage{c.usage}})
		require.NoError(t, err)
		_, err = leaf.Verify(x509.VerifyOptions{Roots: pool})
		require.Error(t, err, "not trusted without the CA")
	}
}

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }
