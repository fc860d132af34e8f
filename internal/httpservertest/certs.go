// Package httpservertest makes certificate authorities and certificates for tests of TLS
// listeners and clients (package httpserver's TLS and client-certificate authentication).
package httpservertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// ca is a certificate authority made for a test: its certificate lives for a day.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the ca's certificate, for a client's trust store or a server's client ca file.
	PEM []byte
}

// newCA creates a ca named name.
func newCA(name string) (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:   pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	return &ca{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n, nil
}

// Server issues a server certificate for hosts (IP addresses or DNS names; default 127.0.0.1
// and localhost) and returns it and its key as PEM.
func (ca *ca) Server(cn string, hosts ...string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: cn}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(tmpl)
}

// Client issues a client certificate with common name cn and returns it and its key as PEM.
func (ca *ca) Client(cn string) (certPEM, keyPEM []byte, err error) {
	return ca.issue(&x509.Certificate{Subject: pkix.Name{CommonName: cn}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

func (ca *ca) issue(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("key: %w", err)
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return nil, nil, err
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// Files are the PEM files of a ca and of one server and one client certificate it issued.
type Files struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

// WriteFiles creates a ca named name in dir (ca.crt) with a server certificate for 127.0.0.1
// and localhost (server.crt, server.key) and a client certificate named client (client.crt,
// client.key).
func WriteFiles(dir, name, client string) (Files, error) {
	ca, err := newCA(name)
	if err != nil {
		return Files{}, err
	}
	sc, sk, err := ca.Server(name + "-server")
	if err != nil {
		return Files{}, err
	}
	cc, ck, err := ca.Client(client)
	if err != nil {
		return Files{}, err
	}
	f := Files{CA: filepath.Join(dir, "ca.crt"), ServerCert: filepath.Join(dir, "server.crt"), ServerKey: filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"), ClientKey: filepath.Join(dir, "client.key")}
	for path, data := range map[string][]byte{f.CA: ca.PEM, f.ServerCert: sc, f.ServerKey: sk, f.ClientCert: cc, f.ClientKey: ck} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return Files{}, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return f, nil
}
