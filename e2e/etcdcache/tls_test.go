package etcdcache_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/kelemetry/kelemetry/diff/changes/etcdstore"
	"github.com/kelemetry/kelemetry/internal/changes"
)

// testPKI is a CA with a server certificate (127.0.0.1, ::1 and localhost) and a client
// certificate it signed, as PEM files.
type testPKI struct {
	caFile, serverCert, serverKey, clientCert, clientKey string
	pool                                                 *x509.CertPool
}

// newPKI generates a CA named name and its two certificates in a temporary folder.
func newPKI(t testing.TB, name string) *testPKI {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	serial := int64(0)
	issue := func(tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, file string) (*x509.Certificate, *ecdsa.PrivateKey) {
		t.Helper()
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(time.Hour)
		if parent == nil { // self-signed
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
		require.NoError(t, err)
		cert, err := x509.ParseCertificate(der)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, file+".pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, file+"-key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600))
		return cert, key
	}
	ca, caKey := issue(&x509.Certificate{Subject: pkix.Name{CommonName: name + " CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}, nil, nil, "ca")
	issue(&x509.Certificate{Subject: pkix.Name{CommonName: "etcd"}, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, caKey, "server")
	// No SANs: etcd then does not check the client's address against the certificate.
	issue(&x509.Certificate{Subject: pkix.Name{CommonName: "kelemetry"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, caKey, "client")
	p := &testPKI{caFile: filepath.Join(dir, "ca.pem"), serverCert: filepath.Join(dir, "server.pem"), serverKey: filepath.Join(dir, "server-key.pem"),
		clientCert: filepath.Join(dir, "client.pem"), clientKey: filepath.Join(dir, "client-key.pem"), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	return p
}

// startEtcdWith starts an embedded etcd like startEtcd, its client URL of scheme, after mod
// adjusted its configuration.
func startEtcdWith(t testing.TB, scheme string, mod func(*embed.Config)) *etcdServer {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cu := url.URL{Scheme: scheme, Host: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	pu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	mod(cfg)
	e, err := embed.StartEtcd(cfg)
	require.NoError(t, err)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		t.Fatal("embedded etcd not ready within 30s")
	}
	s := &etcdServer{e: e, endpoint: cu.String()}
	t.Cleanup(s.stop)
	return s
}

// startTLSEtcd starts an embedded etcd whose client port serves TLS with p's server certificate
// and requires a client certificate signed by p's CA; its endpoint is https://127.0.0.1:port.
func startTLSEtcd(t testing.TB, p *testPKI) *etcdServer {
	t.Helper()
	return startEtcdWith(t, "https", func(cfg *embed.Config) {
		cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = p.serverCert, p.serverKey
		cfg.ClientTLSInfo.TrustedCAFile, cfg.ClientTLSInfo.ClientCertAuth = p.caFile, true
	})
}

// tlsClient is an etcd client of the TLS etcd, configured independently of the code under test.
func tlsClient(t testing.TB, endpoint string, p *testPKI) *clientv3.Client {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(p.clientCert, p.clientKey)
	require.NoError(t, err)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second,
		TLS: &tls.Config{RootCAs: p.pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

// requireKeyWithLease waits until key is in etcd, with a lease.
func requireKeyWithLease(t *testing.T, cli *clientv3.Client, key string) {
	t.Helper()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, key)
		return err == nil && len(resp.Kvs) == 1 && resp.Kvs[0].Lease != 0
	}, 10*time.Second, 10*time.Millisecond, "key %s with a lease", key)
}

// prefixCount is the number of keys under prefix.
func prefixCount(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	return resp.Count
}

// requireUnusable checks a replica that cannot use etcd: it started, it never loads the prefix
// (the failures are counted), a Put is kept locally and its write is counted as failed, and
// Stop returns in time.
func requireUnusable(t *testing.T, r *replica, name string) {
	t.Helper()
	r.cache.Put(replicasChange(name, "5", "6"))
	_, ok := r.cache.Find(changes.Query{Object: deployObject(name), Verb: "update", RequestRV: "5"})
	assert.True(t, ok, "the record is kept locally")
	require.Eventually(t, func() bool {
		return r.counter(t, "kelemetry.diff.etcd.records", "result", "write_error") == 1
	}, 10*time.Second, 10*time.Millisecond, "the failed write is counted")
	assert.Positive(t, r.counter(t, "kelemetry.diff.etcd.errors", "op", "lease")+r.counter(t, "kelemetry.diff.etcd.errors", "op", "put"))
	assert.Zero(t, r.counter(t, "kelemetry.diff.etcd.records", "result", "written"))
	require.Eventually(t, func() bool {
		return r.counter(t, "kelemetry.diff.etcd.errors", "op", "load")+r.counter(t, "kelemetry.diff.etcd.errors", "op", "watch") > 0
	}, 10*time.Second, 10*time.Millisecond, "the failed load is counted")
	select {
	case <-r.cache.Ready():
		t.Fatal("the prefix was loaded")
	default:
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	require.NoError(t, r.cache.Stop(ctx))
	assert.Less(t, time.Since(start), 2*time.Second, "Stop returns in time")
}

// An etcd serving client TLS and requiring client certificates: with caFile, certFile and
// keyFile the leader writes (each key with a lease) and followers read, whichever form the
// endpoint takes (https:// by IP or by name, no scheme, http:// — the TLS files turn TLS on);
// serverName is the name the server's certificate is checked for (one it does not hold fails).
func TestEtcdCacheTLS(t *testing.T) {
	p := newPKI(t, "kelemetry-test")
	srv := startTLSEtcd(t, p)
	port := srv.e.Clients[0].Addr().(*net.TCPAddr).Port
	cfg := etcdConfig(srv.endpoint, "/tls/")
	cfg.CAFile, cfg.CertFile, cfg.KeyFile = p.caFile, p.clientCert, p.clientKey
	leader := newReplica(t, cfg)
	leader.waitReady(t)

	followers := map[string]*replica{}
	for name, mod := range map[string]func(*etcdstore.Config){
		"https by name": func(c *etcdstore.Config) { c.Endpoints = []string{fmt.Sprintf("https://localhost:%d", port)} },
		"no scheme":     func(c *etcdstore.Config) { c.Endpoints = []string{fmt.Sprintf("127.0.0.1:%d", port)} },
		"http scheme":   func(c *etcdstore.Config) { c.Endpoints = []string{fmt.Sprintf("http://127.0.0.1:%d", port)} },
		"server name":   func(c *etcdstore.Config) { c.ServerName = "localhost" },
	} {
		fcfg := cfg
		mod(&fcfg)
		followers[name] = newReplica(t, fcfg)
	}

	leader.cache.Put(replicasChange("web", "5", "6"))
	cli := tlsClient(t, srv.endpoint, p)
	requireKeyWithLease(t, cli, "/tls/c1/apps/deployments/default/web/6")
	require.Eventually(t, func() bool {
		return leader.counter(t, "kelemetry.diff.etcd.records", "result", "written") == 1
	}, 5*time.Second, 10*time.Millisecond)
	q := changes.Query{Object: deployObject("web"), Verb: "update", RequestRV: "5"}
	for name, f := range followers {
		require.Eventually(t, func() bool { _, ok := f.cache.Find(q); return ok }, 10*time.Second, 10*time.Millisecond,
			"follower %s reads the leader's record", name)
		rec, _ := f.cache.Find(q)
		assert.Equal(t, "spec.replicas", rec.Changes[0].Path, name)
		assert.Zero(t, f.counter(t, "kelemetry.diff.etcd.errors", "op", "load"), name)
	}
	assert.Zero(t, leader.counter(t, "kelemetry.diff.etcd.records", "result", "write_error"))

	// A serverName the server's certificate does not name fails the handshake.
	bad := cfg
	bad.ServerName = "etcd.invalid"
	bad.RequestTimeout = 300 * time.Millisecond
	requireUnusable(t, newReplica(t, bad), "server-name")
}

// A TLS etcd the cache cannot talk to (no client certificate, a CA that did not sign the
// server's certificate or no CA file (the system roots), a client certificate of another CA): the cache starts (the application
// must), its writes fail and are counted, nothing hangs, and Stop returns in time.
func TestEtcdCacheTLSRejected(t *testing.T) {
	p, other := newPKI(t, "kelemetry-test"), newPKI(t, "other")
	srv := startTLSEtcd(t, p)
	cli := tlsClient(t, srv.endpoint, p)
	cases := map[string]func(*etcdstore.Config){
		"no client certificate": func(c *etcdstore.Config) { c.CAFile = p.caFile },
		"other CA": func(c *etcdstore.Config) {
			c.CAFile, c.CertFile, c.KeyFile = other.caFile, p.clientCert, p.clientKey
		},
		"client certificate of other": func(c *etcdstore.Config) {
			c.CAFile, c.CertFile, c.KeyFile = p.caFile, other.clientCert, other.clientKey
		},
		"system roots": func(c *etcdstore.Config) { c.CertFile, c.KeyFile = p.clientCert, p.clientKey },
	}
	t.Run("group", func(t *testing.T) {
		for name, mod := range cases {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				cfg := etcdConfig(srv.endpoint, "/tls-rejected/")
				cfg.DialTimeout, cfg.RequestTimeout = 300*time.Millisecond, 300*time.Millisecond
				mod(&cfg)
				requireUnusable(t, newReplica(t, cfg), "web")
			})
		}
	})
	assert.Zero(t, prefixCount(t, cli, "/tls-rejected/"), "nothing got through")
}

// enableAuth turns etcd's authentication on: a root user, and a user kelemetry with password
// s3cret allowed to read and write under prefix only.
func enableAuth(t *testing.T, endpoint, prefix string) *clientv3.Client {
	t.Helper()
	cli := client(t, endpoint)
	ctx := t.Context()
	_, err := cli.RoleAdd(ctx, "root")
	require.NoError(t, err)
	_, err = cli.UserAdd(ctx, "root", "rootpw")
	require.NoError(t, err)
	_, err = cli.UserGrantRole(ctx, "root", "root")
	require.NoError(t, err)
	_, err = cli.RoleAdd(ctx, "kelemetry")
	require.NoError(t, err)
	_, err = cli.RoleGrantPermission(ctx, "kelemetry", prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
	require.NoError(t, err)
	_, err = cli.UserAdd(ctx, "kelemetry", "s3cret")
	require.NoError(t, err)
	_, err = cli.UserGrantRole(ctx, "kelemetry", "kelemetry")
	require.NoError(t, err)
	_, err = cli.AuthEnable(ctx)
	require.NoError(t, err)
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Username: "root", Password: "rootpw"})
	require.NoError(t, err)
	t.Cleanup(func() { root.Close() })
	return root
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// etcd with authentication: a user with a password (from passwordFile, newline-terminated as
// Secrets often are, or inline) and read-write permission on the prefix writes and reads; a
// wrong password fails the connection (counted, retried) without failing the start or hanging
// the stop; a user without permission on the prefix has its writes and loads counted as failed.
func TestEtcdCachePasswordAuth(t *testing.T) {
	// The cheapest password hashing: bcrypt's default cost takes seconds under the race detector.
	srv := startEtcdWith(t, "http", func(cfg *embed.Config) { cfg.BcryptCost = 4 })
	root := enableAuth(t, srv.endpoint, "/auth/")
	cfg := etcdConfig(srv.endpoint, "/auth/")
	cfg.Username, cfg.PasswordFile = "kelemetry", writeFile(t, "password", "s3cret\n")
	leader := newReplica(t, cfg)
	fcfg := cfg
	fcfg.PasswordFile, fcfg.Password = "", "s3cret"
	follower := newReplica(t, fcfg)
	follower.waitReady(t)
	leader.cache.Put(replicasChange("web", "5", "6"))
	requireKeyWithLease(t, root, "/auth/c1/apps/deployments/default/web/6")
	q := changes.Query{Object: deployObject("web"), Verb: "update", RequestRV: "5"}
	require.Eventually(t, func() bool { _, ok := follower.cache.Find(q); return ok }, 10*time.Second, 10*time.Millisecond)
	assert.Zero(t, leader.counter(t, "kelemetry.diff.etcd.errors", "op", "connect"))

	t.Run("wrong password", func(t *testing.T) {
		wcfg := cfg
		wcfg.PasswordFile = writeFile(t, "password", "wrong\n")
		r := newReplica(t, wcfg)
		require.Eventually(t, func() bool {
			return r.counter(t, "kelemetry.diff.etcd.errors", "op", "connect") > 0
		}, 10*time.Second, 10*time.Millisecond, "the failed authentication is counted")
		r.cache.Put(replicasChange("denied", "5", "6"))
		_, ok := r.cache.Find(changes.Query{Object: deployObject("denied"), Verb: "update", RequestRV: "5"})
		assert.True(t, ok, "the record is kept locally")
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		require.NoError(t, r.cache.Stop(ctx))
		assert.Less(t, time.Since(start), 2*time.Second, "Stop returns in time")
		select {
		case <-r.cache.Ready():
			t.Fatal("the prefix was loaded")
		default:
		}
		assert.Equal(t, int64(1), r.counter(t, "kelemetry.diff.etcd.records", "result", "stopped"), "never connected: dropped at Stop")
		assert.Zero(t, r.counter(t, "kelemetry.diff.etcd.records", "result", "written"))
	})

	t.Run("no permission on the prefix", func(t *testing.T) {
		ncfg := etcdConfig(srv.endpoint, "/elsewhere/")
		ncfg.Username, ncfg.Password, ncfg.RequestTimeout = "kelemetry", "s3cret", 300*time.Millisecond
		requireUnusable(t, newReplica(t, ncfg), "denied")
		assert.Positive(t, leader.counter(t, "kelemetry.diff.etcd.records", "result", "written"))
	})
	assert.Equal(t, int64(1), prefixCount(t, root, "/auth/"), "only the authorized write")
	assert.Zero(t, prefixCount(t, root, "/elsewhere/"))
}
