package kubetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nftguard/nftguard/internal/kerneltest"
)

// Admin is the user with the system:masters group.
const Admin = "admin"

// Options configures Start.
type Options struct {
	// Users get a bearer token each and no group: they can do only what
	// RBAC bindings (created by the test) allow.
	Users []string
	// TempDir is where the server's files (certificates, tokens, etcd's
	// data) go, in a directory of their own that Close removes; default
	// os.TempDir().
	TempDir string
	// DualStack gives the API server an IPv6 Service range besides the
	// IPv4 one (ServiceRangeV4, ServiceRangeV6), so tests can create
	// Services with spec.ipFamilies [IPv6] or [IPv4, IPv6]. A Service that
	// does not ask for a family still gets a single IPv4 address, as from
	// a single-stack server; off by default so that every other test's
	// API server stays exactly as it was.
	DualStack bool
	// Audit writes the API server's audit log (every request at the
	// Metadata level: who, verb, resource, response code), read with
	// Server.AuditEvents: what a client really asked for.
	Audit bool
}

// The API server's Service ranges: IPv4 always, IPv6 with DualStack.
const (
	ServiceRangeV4 = "10.96.0.0/16"
	ServiceRangeV6 = "fd00:96::/108"
)

// Server is a running etcd + kube-apiserver pair.
type Server struct {
	// Host is the API server URL, https://127.0.0.1:PORT.
	Host string
	// CAFile verifies the API server's self-signed serving certificate.
	CAFile string

	dir       string
	apiBin    string
	apiPort   int
	etcdURL   string
	tokens    map[string]string
	etcd, api *proc
	// serviceRanges is --service-cluster-ip-range.
	serviceRanges string
	audit         bool
}

// Start runs etcd and kube-apiserver on free loopback ports and returns once
// /readyz answers; t.Cleanup stops both and removes their files. Failures
// fail the test; without the kerneltest switch (the one switch for tests
// with real dependencies) it skips.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	kerneltest.Require(t)
	s, err := Launch(context.Background(), opts)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Launch is Start for programs (the demo): it returns once /readyz
// answers, or an error (also when ctx ends first, having stopped what it
// started). The caller must Close the server; its processes also die with
// the calling process (see childproc).
func Launch(ctx context.Context, opts Options) (_ *Server, err error) {
	apiBin, etcdBin, err := binaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(opts.TempDir, "nftguard-kubetest-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	s := &Server{dir: dir, apiBin: apiBin, tokens: map[string]string{}, serviceRanges: ServiceRangeV4, audit: opts.Audit}
	if opts.DualStack {
		s.serviceRanges += "," + ServiceRangeV6
	}
	// s, not the named result: a failed return has set that to nil.
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := s.writeTokens(append([]string{Admin}, opts.Users...)); err != nil {
		return nil, err
	}
	if err := writeServiceAccountKey(dir); err != nil {
		return nil, err
	}
	if err := s.startEtcd(ctx, etcdBin); err != nil {
		return nil, err
	}
	if s.apiPort, err = freePort(); err != nil {
		return nil, err
	}
	s.Host = fmt.Sprintf("https://127.0.0.1:%d", s.apiPort)
	s.CAFile = filepath.Join(dir, "certs", "apiserver.crt")
	if err := s.startAPIServer(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) writeTokens(users []string) error {
	var b strings.Builder
	for _, u := range users {
		tok, err := randomHex(16)
		if err != nil {
			return err
		}
		s.tokens[u] = tok
		if u == Admin {
			fmt.Fprintf(&b, "%s,%s,%s,\"system:masters\"\n", tok, u, u)
		} else {
			fmt.Fprintf(&b, "%s,%s,%s\n", tok, u, u)
		}
	}
	if err := os.WriteFile(filepath.Join(s.dir, "tokens.csv"), []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("write token file: %w", err)
	}
	return nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// writeServiceAccountKey creates the key pair kube-apiserver requires for
// service account tokens (the tests use static tokens instead).
func writeServiceAccountKey(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	priv, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: priv}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

func (s *Server) startEtcd(ctx context.Context, bin string) error {
	client, err := freePort()
	if err != nil {
		return err
	}
	peer, err := freePort()
	if err != nil {
		return err
	}
	s.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	logPath := filepath.Join(s.dir, "etcd.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin,
		"--data-dir", filepath.Join(s.dir, "etcd"),
		"--name", "kubetest",
		"--listen-client-urls", s.etcdURL, "--advertise-client-urls", s.etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "kubetest="+peerURL,
		"--unsafe-no-fsync", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if s.etcd, err = startProc("etcd", cmd); err != nil {
		return err
	}
	ok := poll(ctx, 30*time.Second, 100*time.Millisecond, func() bool {
		resp, err := http.Get(s.etcdURL + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK || s.etcd.exited()
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if !ok || s.etcd.exited() {
		return fmt.Errorf("etcd not healthy:\n%s", tail(logPath, 4000))
	}
	return nil
}

// StartAPIServer starts kube-apiserver (again, after StopAPIServer) on the
// same port with the same certificates and waits for /readyz.
func (s *Server) StartAPIServer() error { return s.startAPIServer(context.Background()) }

func (s *Server) startAPIServer(ctx context.Context) error {
	if s.api != nil && !s.api.exited() {
		return errors.New("kube-apiserver is already running")
	}
	logPath := filepath.Join(s.dir, "kube-apiserver.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(s.apiBin,
		"--etcd-servers", s.etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port", strconv.Itoa(s.apiPort),
		"--cert-dir", filepath.Join(s.dir, "certs"),
		"--token-auth-file", filepath.Join(s.dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range", s.serviceRanges,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(s.dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(s.dir, "sa.key"),
		// No controller-manager creates default service accounts, and a
		// loopback advertise address needs no endpoint reconciler.
		"--disable-admission-plugins=ServiceAccount",
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true")
	if s.audit {
		policy := filepath.Join(s.dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
			return fmt.Errorf("write audit policy: %w", err)
		}
		cmd.Args = append(cmd.Args, "--audit-policy-file", policy, "--audit-log-path", s.auditPath(),
			"--audit-log-mode=blocking", "--audit-log-format=json")
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if s.api, err = startProc("kube-apiserver", cmd); err != nil {
		return err
	}
	if err := s.waitReady(ctx, 60*time.Second); err != nil {
		return fmt.Errorf("%w\n%s", err, tail(logPath, 6000))
	}
	return nil
}

func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	var last string
	ok := poll(ctx, timeout, 200*time.Millisecond, func() bool {
		if s.api.exited() {
			last = fmt.Sprintf("exited: %v", s.api.Err())
			return true
		}
		cfg := s.Config(Admin)
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			last = err.Error() // the certificate may not be written yet
			return false
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, s.Host+"/readyz", nil)
		resp, err := hc.Do(req)
		if err != nil {
			last = err.Error()
			return false
		}
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if !ok || s.api.exited() {
		return fmt.Errorf("kube-apiserver not ready after %v: %s", timeout, last)
	}
	return nil
}

// StopAPIServer kills kube-apiserver (etcd keeps the data), simulating an
// API server outage.
func (s *Server) StopAPIServer() {
	if s.api != nil {
		s.api.stop()
	}
}

// Close stops both processes and removes every file. Safe to call twice.
func (s *Server) Close() {
	if s.api != nil {
		s.api.stop()
	}
	if s.etcd != nil {
		s.etcd.stop()
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// Token returns a user's bearer token ("" for unknown users).
func (s *Server) Token(user string) string { return s.tokens[user] }

// Config is a client configuration for user (Admin or one of
// Options.Users).
func (s *Server) Config(user string) *rest.Config {
	return &rest.Config{
		Host:            s.Host,
		BearerToken:     s.tokens[user],
		TLSClientConfig: rest.TLSClientConfig{CAFile: s.CAFile},
		QPS:             100, Burst: 200,
	}
}

// WriteKubeconfig writes a kubeconfig for user into dir and returns its
// path, for processes such as `nftguard run --kubeconfig`.
func (s *Server) WriteKubeconfig(dir, user string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: s.Host, CertificateAuthority: s.CAFile}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: s.tokens[user]}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: user}
	cfg.CurrentContext = "kubetest"
	path := filepath.Join(dir, "kubeconfig-"+user)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	return path, nil
}
