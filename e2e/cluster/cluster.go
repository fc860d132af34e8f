// Package cluster runs a real Kubernetes control plane on 127.0.0.1 for end-to-end tests:
// embedded etcd, kube-apiserver (audit log file and audit webhook), kube-controller-manager,
// kube-scheduler and kwok simulating a few nodes and pod lifecycles. The binaries come from the
// cache folder filled by ./cmd/buildbins.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kelemetry/kelemetry/e2e/bins"
	"github.com/kelemetry/kelemetry/e2e/internal/proc"
)

// Identities of the control plane's clients (static tokens).
const (
	AdminUser = "admin"
	KwokUser  = "kwok-controller"
)

// Options configure Start.
type Options struct {
	// BinDir holds the binaries (see package bins); default bins.Dir().
	BinDir string
	// AuditWebhookURL receives kube-apiserver's audit batches, e.g.
	// http://127.0.0.1:8080/audit/test. Empty: no webhook, only the audit log file.
	AuditWebhookURL string
	// AuditWebhookCAFile, with an https AuditWebhookURL, is the CA of the webhook's serving
	// certificate (certificate-authority of the webhook kubeconfig).
	AuditWebhookCAFile string
	// AuditWebhookClientCert and AuditWebhookClientKey are kube-apiserver's client certificate
	// for the webhook (client-certificate, client-key of the webhook kubeconfig).
	AuditWebhookClientCert, AuditWebhookClientKey string
	// AuditPolicyFile is the audit policy; default: DefaultAuditPolicy.
	AuditPolicyFile string
	// Nodes is the number of fake nodes (default 3), named kwok-node-1, kwok-node-2, ...
	Nodes int
	// WorkDir holds certificates, kubeconfigs, logs and etcd's data; default: a new temporary
	// folder, removed by Stop.
	WorkDir string
	// KeepWorkDir keeps WorkDir after Stop (for debugging).
	KeepWorkDir bool
	// BeforeAPIServer, when set, runs once the certificates and kubeconfigs are written and etcd
	// runs, just before kube-apiserver starts: the place to start the audit webhook's receiver.
	BeforeAPIServer func(ctx context.Context, c *Cluster) error
	// APIServerArgs are appended to kube-apiserver's command line (e.g.
	// --tracing-config-file=FILE).
	APIServerArgs []string
	// StartTimeout bounds Start (default 3 minutes).
	StartTimeout time.Duration
	Logger       *slog.Logger
}

// DefaultAuditPolicy records writes with their bodies, Secrets and Events at Metadata level, and
// skips reads and Leases (as deploy/audit-policy.yaml does).
const DefaultAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: None
  resources:
  - group: "coordination.k8s.io"
    resources: ["leases"]
- level: None
  verbs: ["get", "list", "watch"]
- level: Metadata
  resources:
  - group: ""
    resources: ["secrets"]
- level: Metadata
  resources:
  - group: ""
    resources: ["events"]
  - group: "events.k8s.io"
    resources: ["events"]
- level: RequestResponse
`

// Cluster is a running control plane.
type Cluster struct {
	// WorkDir holds everything the cluster wrote.
	WorkDir string
	// Kubeconfig is the path of an admin kubeconfig (user "admin", group system:masters).
	Kubeconfig string
	// AuditLog is the path of kube-apiserver's JSON audit log.
	AuditLog string
	// Server is the API server URL (https://127.0.0.1:port).
	Server string
	// Config and Client act as the admin.
	Config *rest.Config
	Client kubernetes.Interface
	// NodeNames are the fake nodes.
	NodeNames []string

	opts     Options
	logger   *slog.Logger
	etcd     *embed.Etcd
	etcdURL  string
	procs    []*proc.Process // in start order
	stopOnce sync.Once
	stopErr  error
}

// Start brings up a control plane and waits until it is ready: the API server answers /readyz,
// every fake node is Ready, and the default ServiceAccount exists. On error everything started
// is stopped again.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	if opts.BinDir == "" {
		if opts.BinDir, err = bins.Dir(); err != nil {
			return nil, err
		}
	}
	if missing := bins.Missing(opts.BinDir); len(missing) > 0 {
		return nil, fmt.Errorf("missing in %s: %s (run go run ./cmd/buildbins in e2e/)", opts.BinDir, strings.Join(missing, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	c := &Cluster{opts: opts, logger: opts.Logger}
	if opts.WorkDir == "" {
		if c.WorkDir, err = os.MkdirTemp("", "kelemetry-e2e-"); err != nil {
			return nil, err
		}
	} else {
		c.WorkDir = opts.WorkDir
		if err := os.MkdirAll(c.WorkDir, 0o755); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			_ = c.Stop(context.Background())
		}
	}()
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) path(name string) string { return filepath.Join(c.WorkDir, name) }

func (c *Cluster) bin(name string) string { return filepath.Join(c.opts.BinDir, name) }

func (c *Cluster) start(ctx context.Context) error {
	t0 := time.Now()
	if err := c.writeFiles(); err != nil {
		return err
	}
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	c.logger.Debug("etcd ready", "took", time.Since(t0).Round(time.Millisecond))
	if c.opts.BeforeAPIServer != nil {
		if err := c.opts.BeforeAPIServer(ctx, c); err != nil {
			return err
		}
	}
	if err := c.startAPIServer(ctx); err != nil {
		return err
	}
	c.logger.Debug("kube-apiserver ready", "took", time.Since(t0).Round(time.Millisecond))

	kcm := []string{
		"--kubeconfig=" + c.path("controller-manager.kubeconfig"),
		"--use-service-account-credentials",
		"--service-account-private-key-file=" + c.path("sa.key"),
		"--root-ca-file=" + c.path("apiserver.crt"),
		"--leader-elect=false",
		"--secure-port=0",
		"--cluster-name=kelemetry-e2e",
	}
	if _, err := c.run("kube-controller-manager", bins.KubeControllerManager, kcm, nil); err != nil {
		return err
	}
	sched := []string{
		"--kubeconfig=" + c.path("scheduler.kubeconfig"),
		"--leader-elect=false",
		"--secure-port=0",
	}
	if _, err := c.run("kube-scheduler", bins.KubeScheduler, sched, nil); err != nil {
		return err
	}
	stages, err := bins.KwokStages(c.opts.BinDir)
	if err != nil {
		return err
	}
	kwokPort, err := proc.FreePort()
	if err != nil {
		return err
	}
	kwok := []string{
		"--kubeconfig=" + c.path("kwok.kubeconfig"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--server-address=" + proc.HostPort(kwokPort),
		"--node-ip=127.0.0.1",
	}
	for _, s := range stages {
		kwok = append(kwok, "--config="+s)
	}
	// kwok also reads ~/.kwok/kwok.yaml when it exists: give it a HOME of its own.
	kwokHome := c.path("kwok-home")
	if err := os.MkdirAll(kwokHome, 0o755); err != nil {
		return err
	}
	if _, err := c.run("kwok", bins.Kwok, kwok, []string{"HOME=" + kwokHome}); err != nil {
		return err
	}
	if err := c.createNodes(ctx); err != nil {
		return err
	}
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	c.logger.Info("test cluster ready", "took", time.Since(t0).Round(time.Millisecond), "server", c.Server, "kubeconfig", c.Kubeconfig)
	return nil
}

// writeFiles writes certificates, keys, the token file, kubeconfigs and the audit configuration.
func (c *Cluster) writeFiles() error {
	if err := writeServingCert(c.path("apiserver.crt"), c.path("apiserver.key")); err != nil {
		return err
	}
	if err := writeServiceAccountKey(c.path("sa.key"), c.path("sa.pub")); err != nil {
		return err
	}
	port, err := proc.FreePort()
	if err != nil {
		return err
	}
	c.Server = "https://" + proc.HostPort(port)
	tokens := map[string]string{}
	var tokenFile strings.Builder
	for _, u := range []struct{ name, user, groups string }{
		{"admin", AdminUser, "system:masters"},
		{"controller-manager", "system:kube-controller-manager", ""},
		{"scheduler", "system:kube-scheduler", ""},
		{"kwok", KwokUser, "system:masters"},
	} {
		tok, err := randomToken()
		if err != nil {
			return err
		}
		tokens[u.name] = tok
		// token,user,uid[,"group1,group2"]
		line := tok + "," + u.user + "," + u.user
		if u.groups != "" {
			line += `,"` + u.groups + `"`
		}
		tokenFile.WriteString(line + "\n")
		if err := writeKubeconfig(c.path(u.name+".kubeconfig"), c.Server, c.path("apiserver.crt"), u.user, tok); err != nil {
			return err
		}
	}
	if err := os.WriteFile(c.path("tokens.csv"), []byte(tokenFile.String()), 0o600); err != nil {
		return err
	}
	c.Kubeconfig = c.path("admin.kubeconfig")
	c.AuditLog = c.path("audit.log")
	if c.opts.AuditPolicyFile == "" {
		c.opts.AuditPolicyFile = c.path("audit-policy.yaml")
		if err := os.WriteFile(c.opts.AuditPolicyFile, []byte(DefaultAuditPolicy), 0o644); err != nil {
			return err
		}
	}
	if c.opts.AuditWebhookURL != "" {
		if _, err := url.Parse(c.opts.AuditWebhookURL); err != nil {
			return fmt.Errorf("audit webhook URL: %w", err)
		}
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["kelemetry"] = &clientcmdapi.Cluster{Server: c.opts.AuditWebhookURL, CertificateAuthority: c.opts.AuditWebhookCAFile}
		cfg.AuthInfos["kube-apiserver"] = &clientcmdapi.AuthInfo{ClientCertificate: c.opts.AuditWebhookClientCert, ClientKey: c.opts.AuditWebhookClientKey}
		cfg.Contexts["kelemetry"] = &clientcmdapi.Context{Cluster: "kelemetry", AuthInfo: "kube-apiserver"}
		cfg.CurrentContext = "kelemetry"
		if err := clientcmd.WriteToFile(*cfg, c.path("audit-webhook.kubeconfig")); err != nil {
			return fmt.Errorf("audit webhook kubeconfig: %w", err)
		}
	}
	c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	c.Config.QPS, c.Config.Burst = 100, 200
	c.Client, err = kubernetes.NewForConfig(c.Config)
	return err
}

func writeKubeconfig(path, server, caFile, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kelemetry-e2e"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caFile}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["kelemetry-e2e"] = &clientcmdapi.Context{Cluster: "kelemetry-e2e", AuthInfo: user}
	cfg.CurrentContext = "kelemetry-e2e"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return nil
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	clientPort, err := proc.FreePort()
	if err != nil {
		return err
	}
	peerPort, err := proc.FreePort()
	if err != nil {
		return err
	}
	cfg := embed.NewConfig()
	cfg.Name = "e2e"
	cfg.Dir = c.path("etcd")
	client := url.URL{Scheme: "http", Host: proc.HostPort(clientPort)}
	peer := url.URL{Scheme: "http", Host: proc.HostPort(peerPort)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{c.path("etcd.log")}
	cfg.UnsafeNoFsync = true // a throw-away test cluster: durability is not needed, speed is
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	c.etcd = e
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return fmt.Errorf("etcd: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("waiting for etcd: %w", ctx.Err())
	}
	c.etcdURL = client.String()
	return nil
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	u, _ := url.Parse(c.Server)
	args := []string{
		"--etcd-servers=" + c.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + u.Port(),
		"--cert-dir=" + c.path("apiserver-certs"),
		"--tls-cert-file=" + c.path("apiserver.crt"),
		"--tls-private-key-file=" + c.path("apiserver.key"),
		"--token-auth-file=" + c.path("tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.path("sa.pub"),
		"--service-account-signing-key-file=" + c.path("sa.key"),
		"--api-audiences=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--endpoint-reconciler-type=none",
		"--audit-policy-file=" + c.opts.AuditPolicyFile,
		"--audit-log-path=" + c.AuditLog,
		"--audit-log-format=json",
		"--audit-log-maxsize=0",
		"--profiling=false",
	}
	if c.opts.AuditWebhookURL != "" {
		args = append(args,
			"--audit-webhook-config-file="+c.path("audit-webhook.kubeconfig"),
			"--audit-webhook-batch-max-wait=1s",
			"--audit-webhook-initial-backoff=1s",
		)
	}
	args = append(args, c.opts.APIServerArgs...)
	p, err := c.run("kube-apiserver", bins.KubeAPIServer, args, nil)
	if err != nil {
		return err
	}
	return poll(ctx, 200*time.Millisecond, time.Until(deadline(ctx)), "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		if done, perr := p.Exited(); done {
			return false, fmt.Errorf("kube-apiserver exited (%v): %s", perr, p.LogTail(3000))
		}
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, fmt.Errorf("%w: %s", err, body)
		}
		return string(body) == "ok", nil
	})
}

func deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(3 * time.Minute)
}

// run starts one of the binaries, logging to <name>.log in the work folder.
func (c *Cluster) run(name, binName string, args, env []string) (*proc.Process, error) {
	p, err := proc.Start(c.logger, name, c.bin(binName), args, env, c.path(name+".log"))
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// createNodes registers the fake nodes kwok manages.
func (c *Cluster) createNodes(ctx context.Context) error {
	for i := 1; i <= c.opts.Nodes; i++ {
		name := "kwok-node-" + strconv.Itoa(i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
				Labels: map[string]string{
					"type":                   "kwok",
					"kubernetes.io/hostname": name,
					"kubernetes.io/os":       "linux",
					"kubernetes.io/arch":     "amd64",
					"kubernetes.io/role":     "agent",
				},
			},
		}
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", name, err)
		}
		c.NodeNames = append(c.NodeNames, name)
	}
	return nil
}

// waitReady waits until every fake node is Ready and the default ServiceAccount exists (pods
// cannot be created before), failing early when a component exits.
func (c *Cluster) waitReady(ctx context.Context) error {
	return poll(ctx, 250*time.Millisecond, time.Until(deadline(ctx)), "nodes Ready and the default ServiceAccount", func(ctx context.Context) (bool, error) {
		if err := c.checkProcesses(); err != nil {
			return false, err
		}
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready < c.opts.Nodes {
			return false, fmt.Errorf("%d of %d nodes Ready", ready, c.opts.Nodes)
		}
		if _, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, err
		}
		return true, nil
	})
}

// checkProcesses returns an error naming the first component that exited.
func (c *Cluster) checkProcesses() error {
	for _, p := range c.procs {
		if done, err := p.Exited(); done {
			return fmt.Errorf("%s exited (%v); log %s: %s", p.Name(), err, p.LogPath(), p.LogTail(3000))
		}
	}
	return nil
}

// Healthy returns an error when a component has exited.
func (c *Cluster) Healthy() error { return c.checkProcesses() }

// LogFiles lists the components' log files.
func (c *Cluster) LogFiles() []string {
	out := []string{c.path("etcd.log")}
	for _, p := range c.procs {
		out = append(out, p.LogPath())
	}
	return out
}

// Stop stops every component (newest first; each whole process group, SIGTERM then SIGKILL),
// closes etcd and removes the work folder unless KeepWorkDir. It is safe to call more than once.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		var errs []error
		grace := 10 * time.Second
		if d, ok := ctx.Deadline(); ok {
			grace = min(grace, max(time.Until(d)/time.Duration(len(c.procs)+1), time.Second))
		}
		for i := len(c.procs) - 1; i >= 0; i-- {
			if err := c.procs[i].Stop(grace); err != nil {
				errs = append(errs, err)
			}
		}
		if c.etcd != nil {
			c.etcd.Close()
		}
		if !c.opts.KeepWorkDir && c.WorkDir != "" {
			if err := os.RemoveAll(c.WorkDir); err != nil {
				errs = append(errs, err)
			}
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}
