package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/docgen"
)

// flagDocs is what docs/reference/cli.md says of the flags beyond their usage strings: the
// value's name, the YAML key of the same setting, and pointers to the pages about it.
var flagDocs = map[string]docgen.FlagDoc{
	"config":                      {Arg: "FILE", More: "Its keys: [Configuration keys](config.md); an example: [deploy/allinone.yaml](../../deploy/allinone.yaml)."},
	"cluster":                     {YAML: "cluster"},
	"audit-addr":                  {Arg: "HOST:PORT", YAML: "auditAddr", More: "`:8080` listens on every interface."},
	"http-addr":                   {Arg: "HOST:PORT", YAML: "httpAddr", More: "The web UI is served there too."},
	"audit-tls-cert":              {Arg: "FILE", YAML: "auditTLS.certFile", More: "See [Security](../operations/security.md)."},
	"audit-tls-key":               {Arg: "FILE", YAML: "auditTLS.keyFile"},
	"audit-client-ca":             {Arg: "FILE", YAML: "auditAuth.clientCAFile"},
	"audit-token-file":            {Arg: "FILE", YAML: "auditAuth.tokenFiles"},
	"http-tls-cert":               {Arg: "FILE", YAML: "httpTLS.certFile"},
	"http-tls-key":                {Arg: "FILE", YAML: "httpTLS.keyFile"},
	"http-token-file":             {Arg: "FILE", YAML: "httpAuth.tokenFiles"},
	"http-proxy-client-ca":        {Arg: "FILE", YAML: "httpAuth.proxy.clientCAFile"},
	"http-proxy-allowed-name":     {Arg: "CN", YAML: "httpAuth.proxy.allowedNames"},
	"data-dir":                    {Arg: "DIR", YAML: "dataDir"},
	"audit-queue-durable":         {YAML: "audit.queue.durable"},
	"audit-queue-nats":            {Arg: "URL[,URL...]", YAML: "audit.queue.nats.urls", More: "See [the NATS queue](../ingest/nats.md)."},
	"audit-queue-nats-creds":      {Arg: "FILE", YAML: "audit.queue.nats.credentialsFile"},
	"audit-queue-nats-member":     {Arg: "I/N", YAML: "audit.queue.nats.member", More: "(and `audit.queue.nats.members`)"},
	"replay":                      {Arg: "FILE", YAML: "audit.replay"},
	"follow":                      {Arg: "FILE", YAML: "audit.follow"},
	"audit-dump":                  {Arg: "FILE", YAML: "audit.dump.path", More: "See [Dump](../ingest/dump-and-forward.md)."},
	"audit-forward":               {Arg: "URL", YAML: "audit.forward[].url", More: "See [Forward](../ingest/dump-and-forward.md)."},
	"replay-events":               {Arg: "FILE", YAML: "event.replay"},
	"event-watch":                 {YAML: "event.watch", More: "The Events of every configured cluster are watched, each cluster with its own checkpoint."},
	"event-api":                   {Arg: "API", YAML: "event.source.api"},
	"event-checkpoint-file":       {Arg: "FILE", YAML: "event.source.checkpointFile"},
	"diff-disable":                {YAML: "audit.consumer.diff.disabled"},
	"diff-cache-size":             {YAML: "audit.consumer.diff.cacheSize"},
	"window":                      {YAML: "window", More: "Windows are aligned to the Unix epoch; one value for every part."},
	"kubeconfig":                  {Arg: "FILE", YAML: "kubeconfig", More: "It is the cluster named `--cluster`; without it linkers use the audit bodies only, and no Events or informers are watched."},
	"cluster-kubeconfig":          {Arg: "NAME=FILE", YAML: "clusters", More: "Its objects are diffed by informers and its Events watched too. See [Several clusters](../install/several-clusters.md)."},
	"kube-qps":                    {YAML: "clusters[].qps", More: "client-go's own 5 and 10 make the informers' first lists crawl."},
	"kube-burst":                  {YAML: "clusters[].burst"},
	"diff-informer":               {YAML: "informerDiff.enabled", More: "Default true with a kubeconfig."},
	"diff-leader-elect":           {YAML: "informerDiff.leaderElection.enabled"},
	"diff-leader-elect-namespace": {YAML: "informerDiff.leaderElection.leaseNamespace"},
	"diff-leader-elect-identity":  {YAML: "informerDiff.leaderElection.identity"},
	"link-rules":                  {Arg: "DIR", YAML: "linkRules.dir", More: "No cluster needed; see [the LinkRule CRD](linkrule-crd.md)."},
	"link-rules-watch":            {YAML: "linkRules.disableWatch", More: "The key says the opposite: `disableWatch: true` is `--link-rules-watch=false`."},
	"otlp-endpoint":               {Arg: "ENDPOINT", YAML: "otlp.endpoint", More: "See [Exporting over OTLP](../operations/exporting-otlp.md)."},
	"remote-storage-addr":         {Arg: "HOST:PORT", YAML: "remoteStorageAddr", More: "See [Jaeger storage API](storage-api.md)."},
	"otlp-addr":                   {Arg: "HOST:PORT", YAML: "otlpAddr", More: "TLS and authentication: `otlpTLS`, `otlpAuth`."},
	"apiserver-traces":            {YAML: "apiserverTraces.enabled", More: "See [Inside the API server](../guides/apiserver-traces.md)."},
	"replay-apiserver-traces":     {Arg: "FILE", YAML: "apiserverTraces.replay"},
	"remote-linker":               {Arg: "NAME[=SUBJECT]", YAML: "remoteLinkers.linkers[].name", More: "See [Linkers in their own process](../sdk/remote-linkers.md)."},
	"remote-linker-timeout":       {YAML: "remoteLinkers.linkers[].timeout"},
	"remote-linker-nats-url":      {Arg: "URL", YAML: "remoteLinkers.nats.urls"},
	"remote-linker-nats-creds":    {Arg: "FILE", YAML: "remoteLinkers.nats.credentialsFile"},
	"remote-linker-nats-nkey":     {Arg: "FILE", YAML: "remoteLinkers.nats.nkeySeedFile"},
	"remote-linker-nats-tls-ca":   {Arg: "FILE", YAML: "remoteLinkers.nats.tls.caFile"},
	"remote-linker-nats-tls-cert": {Arg: "FILE", YAML: "remoteLinkers.nats.tls.certFile"},
	"remote-linker-nats-tls-key":  {Arg: "FILE", YAML: "remoteLinkers.nats.tls.keyFile"},
	"role":                        {Arg: "all|ingest|query", YAML: "role", More: "See [Running at scale](../operations/scaling.md)."},
	"store-backend":               {Arg: "embedded|memory|jaeger", YAML: "storeBackend"},
	"jaeger-endpoint":             {Arg: "HOST:PORT", YAML: "jaeger.endpoint"},
	"jaeger-otlp-endpoint":        {Arg: "ENDPOINT", YAML: "jaeger.otlp.endpoint"},
	"kelemetrix-config":           {Arg: "FILE", YAML: "kelemetrix", More: "See [kelemetrix](../sdk/kelemetrix.md)."},
	"memory-limit":                {Arg: "LIMIT", YAML: "memoryLimit", More: "See [Memory](../operations/memory.md)."},
	"log-level":                   {Arg: "LEVEL"},
	"pprof-addr":                  {Arg: "HOST:PORT"},
	"set":                         {Arg: "KEY.PATH=VALUE", More: "Sizes take units (`20Gi`), durations too (`168h`)."},
}

// cliPage renders docs/reference/cli.md from the kelemetry command and its flag set.
func cliPage() (string, error) {
	var pprofAddr string
	fs, _ := newFlagSet(io.Discard, &pprofAddr)
	table, err := docgen.FlagsTable(fs, flagDocs)
	if err != nil {
		return "", err
	}
	root := newRootCommand(context.Background(), io.Discard, io.Discard)
	replayCmd := newReplayCommand(context.Background(), nil, io.Discard, io.Discard)
	replayTable, err := docgen.FlagsTable(replayCmd.Flags(), nil)
	if err != nil {
		return "", err
	}
	var cmds [][]string
	for _, c := range root.Commands() {
		cmds = append(cmds, []string{docgen.Code("kelemetry " + c.Name()), docgen.Cell(c.Short)})
	}
	return "<!-- Generated by `KELEMETRY_UPDATE_DOCS=1 go test ./cmd/kelemetry -run '^TestCLIReference$'` from the commands and flags of cmd/kelemetry (cli.go, flags.go) and flagDocs (docs_test.go): edit those, not this page. -->\n" +
		`# Command line

` + "`kelemetry`" + ` is the product binary: the image's command, and
` + "`go install github.com/kelemetry/kelemetry/cmd/kelemetry@latest`" + ` for a workstation. Without a
command it serves.

` + docgen.Table([]string{"command", "what it does"}, cmds) + `
` + "`kelemetry validate`" + ` prints each problem on its own line, ` + "`file:line: key: what to do`" + `, and
exits 1: an unknown key names the closest known one, a moved key says where it went, a value of the
wrong type gets an example. ` + "`kelemetry --help`" + ` lists the flags by topic; an unknown flag gets one
line naming the closest flag.

Every command takes the flags below. The settings come from defaults, then the YAML file of
` + "`--config`" + `, then the flags given on the command line, then ` + "`--set`" + `. Most flags have a key of the
YAML file: [Configuration keys](config.md) describes every key, those with a flag too. A repeatable
flag adds to the list of the file, except ` + "`--kelemetrix-config`" + `, which replaces the file's
` + "`kelemetrix`" + ` key. Durations are written with a unit (` + "`30s`, `30m`, `168h`" + `), and so are sizes of
keys that hold bytes, in the file and in ` + "`--set`" + ` (` + "`512Mi`, `10Gi`, `1G`" + `). The single-dash forms of
earlier builds (` + "`-config`" + `) still work.

` + table + `
Some settings have no flag: the HTTP timeouts of both listeners (` + "`httpTimeouts`" + `: ` + "`readHeader`" + ` 10s,
` + "`read`" + ` 30s for the whole request, body included, so that a client trickling its body is cut off,
` + "`idle`" + ` 2m), the queue and webhook bounds (` + "`audit.queue`" + `, ` + "`audit.webhook`" + `), retention (` + "`store`" + `), the query
budgets (` + "`query`" + `) and the rest of [Configuration keys](config.md): set them in the file or with ` + "`--set`" + `.

SIGTERM stops accepting input, drains the audit queue and the link jobs, and flushes the sinks.

## kelemetry replay

` + "`kelemetry replay FILE...`" + ` reads audit logs as kube-apiserver writes them
(` + "`--audit-log-format=json`" + `, ` + "`.gz`" + ` too; a line may also hold a whole EventList, as
` + "`--audit-dump`" + ` writes them). Without ` + "`--to`" + ` it runs the ingest side on the configuration above
until every event of the files is in the store of the data folder, then exits; ` + "`kelemetry serve`" + ` on
the same folder then shows the traces. With ` + "`--to`" + ` it posts the events in batches to a running
webhook, waiting out 429 and 503 answers. Lines that are not audit events are counted and skipped.
Progress goes to stderr: a bar on a terminal, a line every ` + "`--progress-every`" + ` otherwise.
The store keeps windows for ` + "`store.maxAge`" + ` (7 days by default) after they end: events older than
that are deleted by the next retention check, when ` + "`kelemetry serve`" + ` starts on the folder. To look
at an older log, raise it (` + "`--set store.maxAge=720h`" + `) for both commands.

` + "```sh" + `
kelemetry replay --data-dir kelemetry-data audit.log audit-1.log.gz
kelemetry replay --to https://kelemetry:8080/audit/prod --to-ca-file ca.crt --to-token-file token audit.log
` + "```" + `

` + replayTable + `
`, nil
}

// docs/reference/cli.md is the command-line reference generated from the flag set
// (KELEMETRY_UPDATE_DOCS=1 rewrites it).
func TestCLIReference(t *testing.T) {
	got, err := cliPage()
	require.NoError(t, err)
	docgen.Golden(t, filepath.Join("..", "..", docgen.CLIPagePath), got)
}

// flagDocs documents flags that exist, under YAML keys of the configuration; and the docs check,
// which reads the flags of `go run ./cmd/kelemetry` from this package's source, reads the
// flags the flag set defines.
func TestCLIReferenceMatchesTheFlagSet(t *testing.T) {
	var pprofAddr string
	fs, _ := newFlagSet(io.Discard, &pprofAddr)
	_, err := docgen.FlagsTable(fs, flagDocs)
	require.NoError(t, err, "every flag of flagDocs is defined, and every flag of a type of its own has an Arg")
	fromSource, err := docgen.MainFlags(".")
	require.NoError(t, err)
	replayCmd := newReplayCommand(context.Background(), nil, io.Discard, io.Discard)
	assert.ElementsMatch(t, append(docgen.FlagNames(fs), docgen.FlagNames(replayCmd.Flags())...), fromSource)

	m, err := docgen.LoadModule(filepath.Join("..", ".."))
	require.NoError(t, err)
	fields, err := m.ConfigFields(m.Path, "Config", "yaml")
	require.NoError(t, err)
	keys := map[string]bool{}
	for _, f := range fields {
		keys[f.Path] = true
	}
	for name, d := range flagDocs {
		if d.YAML != "" {
			assert.True(t, keys[d.YAML], "--%s: %s is not a key of the configuration", name, d.YAML)
		}
	}

	// A flag documented but not defined, or a list flag without a value name, fails.
	_, err = docgen.FlagsTable(fs, map[string]docgen.FlagDoc{"no-such-flag": {}})
	assert.ErrorContains(t, err, "--no-such-flag is documented but not defined")
	_, err = docgen.FlagsTable(fs, nil)
	assert.ErrorContains(t, err, "--replay: a flag of type stringArray needs FlagDoc.Arg")
}

// newFlagSet defines the flags and does nothing else: building the set twice, and parsing
// --help, runs nothing and leaves the same flags.
func TestNewFlagSetRunsNothing(t *testing.T) {
	var a, b string
	fs1, _ := newFlagSet(io.Discard, &a)
	fs2, build := newFlagSet(io.Discard, &b)
	assert.Equal(t, docgen.FlagNames(fs1), docgen.FlagNames(fs2))
	for _, name := range docgen.FlagNames(fs1) {
		assert.NotEmpty(t, fs1.Lookup(name).Annotations[sectionAnnotation], "--%s has a section of the help", name)
	}
	require.NoError(t, fs2.Parse([]string{"--pprof-addr", "127.0.0.1:0", "--cluster", "c1"}))
	assert.Equal(t, "127.0.0.1:0", b, "--pprof-addr sets the caller's variable")
	assert.Empty(t, a)
	cfg, _, err := build(true)
	require.NoError(t, err)
	assert.Equal(t, "c1", cfg.Cluster)
	assert.True(t, strings.HasPrefix(fs1.Lookup("config").Usage, "YAML configuration file"))
}
