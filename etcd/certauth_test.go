package etcd_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hold-dev/hold/etcd"
	"github.com/hold-dev/hold/etcd/etcdtest"
	"github.com/hold-dev/hold/internal/cycletest"
)

// TestDeadlockCertificateUsers: on a cluster whose clients authenticate
// by certificate (no password: etcd takes the certificate's common name
// as the user), each user's waits are its own, as with passwords. Another
// user's planted wait (mallory's certificate) is never trusted; the same
// wait of the user itself is. Before, every such client was the empty
// user, and all shared one prefix of wait entries.
func TestDeadlockCertificateUsers(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t)
	server := ca.issue(t, dir, "server", true)
	srv, err := etcdtest.Start(dir, etcdtest.Config{ClientTLS: &etcdtest.TLSFiles{CertFile: server.cert, KeyFile: server.key, CAFile: ca.file}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	eps := srv.Endpoints()
	certs := map[string]pair{}
	for _, u := range []string{"root", "alice", "mallory"} {
		certs[u] = ca.issue(t, dir, u, false)
	}
	admin := certClient(t, eps, ca, certs["root"])
	ctx := context.Background()
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { return addUser(ctx, admin, "alice") },
		func() error { return addUser(ctx, admin, "mallory") },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	alice, err := etcd.Dial(dctx, etcd.Config{Endpoints: eps, CAFile: ca.file, CertFile: certs["alice"].cert, KeyFile: certs["alice"].key, DialTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	base := "locks/cert-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, c := range []struct {
		by      string
		planted bool
	}{{"mallory", true}, {"alice", false}} {
		t.Run(c.by, func(t *testing.T) {
			l1, l2 := base+"-"+c.by+"-1", base+"-"+c.by+"-2"
			cycletest.WaitPlanted(t, alice, l1, l2, func() { plantWait(t, certClient(t, eps, ca, certs[c.by]), l2, l1) }, !c.planted)
		})
	}
}

// testCA signs the certificates of a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

// pair is a certificate's and its key's PEM files.
type pair struct{ cert, key string }

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hold test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(t.TempDir(), "ca.pem")
	writePEM(t, file, "CERTIFICATE", der)
	return &testCA{cert: cert, key: key, file: file}
}

// issue makes a certificate named cn, for a server on 127.0.0.1 or a
// client.
func (ca *testCA) issue(t *testing.T, dir, cn string, server bool) pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := pair{cert: filepath.Join(dir, cn+".pem"), key: filepath.Join(dir, cn+"-key.pem")}
	writePEM(t, p.cert, "CERTIFICATE", der)
	writePEM(t, p.key, "EC PRIVATE KEY", kb)
	return p
}

func writePEM(t *testing.T, file, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// certClient is a plain client that authenticates by the certificate p.
func certClient(t *testing.T, eps []string, ca *testCA, p pair) *clientv3.Client {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(p.cert, p.key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 30 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
