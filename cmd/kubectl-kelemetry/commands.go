package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
	"golang.org/x/term"
)

// options are the plugin's global flags.
type options struct {
	server           string
	tokenFile        string
	caFile           string
	insecure         bool
	cluster          string
	kubeconfig       string
	context          string
	namespace        string
	service          string
	serviceNamespace string
	https            bool
	color            string
}

func newRootCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	o := &options{}
	root := &cobra.Command{
		Use:   "kubectl-kelemetry",
		Short: "Kelemetry's traces of Kubernetes objects, in the terminal",
		Long: "kubectl kelemetry shows what Kelemetry traced of an object: its tree of related objects\n" +
			"with the critical path marked (trace), the web UI's link (open), the object at a moment (at),\n" +
			"and what changed across the cluster (changes).\n\n" +
			"Kelemetry is found by --server, by $KELEMETRY_URL, or by a port-forward to its Service\n" +
			"(--service in --service-namespace) through the kubeconfig, as kubectl port-forward does.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVar(&o.server, "server", "", "Kelemetry's API, e.g. https://kelemetry.example.com (default $KELEMETRY_URL, else a port-forward to --service)")
	pf.StringVar(&o.tokenFile, "token-file", "", "file of a bearer token the API accepts (default $KELEMETRY_TOKEN holds the token itself; with a port-forward, else the Secret <service>-api-token)")
	pf.StringVar(&o.caFile, "ca-file", "", "PEM CA bundle that verifies the API's certificate")
	pf.BoolVar(&o.insecure, "insecure-skip-tls-verify", false, "do not verify the API's certificate")
	pf.StringVar(&o.cluster, "cluster", "", "Kelemetry's name of the object's cluster (default $KELEMETRY_CLUSTER, the only cluster Kelemetry knows, or the kubeconfig context's name)")
	pf.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	pf.StringVar(&o.context, "context", "", "kubeconfig context")
	pf.StringVarP(&o.namespace, "namespace", "n", "", "the object's namespace (default the context's)")
	pf.StringVar(&o.service, "service", "kelemetry", "with a port-forward: Kelemetry's API Service")
	pf.StringVar(&o.serviceNamespace, "service-namespace", "kelemetry", "with a port-forward: the Service's namespace")
	pf.BoolVar(&o.https, "https", false, "with a port-forward: the API serves HTTPS (set by itself when the Secret <service>-tls holds the chart's CA)")
	pf.StringVar(&o.color, "color", "auto", "colour the output: auto (on a terminal), always or never")

	var since time.Duration
	var mode string
	trace := &cobra.Command{
		Use:   "trace KIND/NAME",
		Short: "Print the object's trace as a tree: related objects, events, the critical path marked",
		Example: "  kubectl kelemetry trace deployment/web -n shop\n" +
			"  kubectl kelemetry trace deploy/web --since 24h --mode critical",
		Args: cobra.RangeArgs(1, 2),
		RunE: o.withObject(ctx, stderr, func(s *session, ref objectRef) error {
			tr, err := s.findTrace(ctx, ref, time.Now().Add(-since), time.Now())
			if err != nil {
				return err
			}
			var cp criticalPath
			if err := s.api.getJSON(ctx, "/api/critical-path/"+tr.TraceID, nil, &cp); err != nil {
				return err
			}
			color := o.useColor(stdout)
			switch mode {
			case "tree":
				return renderTree(stdout, tr, cp, color)
			case "critical":
				return renderCritical(stdout, cp, color)
			default:
				return fmt.Errorf("--mode %q: want tree or critical", mode)
			}
		}),
	}
	trace.Flags().DurationVar(&since, "since", time.Hour, "how far back to look")
	trace.Flags().StringVar(&mode, "mode", "tree", "tree (the related objects, the critical path marked) or critical (the critical path's steps)")

	var browser bool
	var at string
	open := &cobra.Command{
		Use:   "open KIND/NAME",
		Short: "Print the web UI's link to the object's trace (--browser opens it)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: o.withObject(ctx, stderr, func(s *session, ref objectRef) error {
			q := url.Values{"cluster": {ref.Cluster}, "group": {ref.Group}, "resource": {ref.Resource}, "namespace": {ref.Namespace}, "name": {ref.Name}}
			if at != "" {
				q.Set("time", at)
			}
			link := s.api.base + "/redirect?" + q.Encode()
			if _, err := fmt.Fprintln(stdout, link); err != nil {
				return err
			}
			if !browser {
				return nil
			}
			if err := openBrowser(ctx, link); err != nil {
				return err
			}
			if s.forward != nil {
				fmt.Fprintln(stderr, "keeping the port-forward open for the browser; Ctrl-C ends it")
				<-ctx.Done()
			}
			return nil
		}),
	}
	open.Flags().BoolVar(&browser, "browser", false, "open the link in a browser")
	open.Flags().StringVar(&at, "time", "", "around this time (RFC 3339), instead of now")

	var atTime string
	atCmd := &cobra.Command{
		Use:   "at KIND/NAME --time T",
		Short: "Print the object as it was at a moment (YAML), from the stored snapshots and diffs",
		Args:  cobra.RangeArgs(1, 2),
		PreRunE: func(*cobra.Command, []string) error {
			if atTime == "" {
				return fmt.Errorf("--time is required (RFC 3339, e.g. %s)", time.Now().UTC().Truncate(time.Second).Format(time.RFC3339))
			}
			return nil
		},
		RunE: o.withObject(ctx, stderr, func(s *session, ref objectRef) error {
			var resp struct {
				Data struct {
					Body json.RawMessage   `json:"body"`
					Gaps []json.RawMessage `json:"gaps"`
				} `json:"data"`
			}
			q := url.Values{"cluster": {ref.Cluster}, "group": {ref.Group}, "resource": {ref.Resource}, "namespace": {ref.Namespace}, "name": {ref.Name}, "time": {atTime}}
			if err := s.api.getJSON(ctx, "/api/objects/at", q, &resp); err != nil {
				return err
			}
			var obj any
			if err := json.Unmarshal(resp.Data.Body, &obj); err != nil {
				return fmt.Errorf("the object Kelemetry answered: %w", err)
			}
			var out bytes.Buffer
			enc := yaml.NewEncoder(&out)
			enc.SetIndent(2)
			if err := enc.Encode(obj); err != nil {
				return err
			}
			for _, g := range resp.Data.Gaps {
				fmt.Fprintln(stderr, "gap:", string(g))
			}
			_, err := stdout.Write(out.Bytes())
			return err
		}),
	}
	atCmd.Flags().StringVar(&atTime, "time", "", "the moment, RFC 3339 (2026-12-04T10:00:00Z)")

	root.AddCommand(trace, open, atCmd, o.newChangesCommand(ctx, stdout, stderr))
	return root
}

// withObject is a command's RunE that connects to Kelemetry, resolves the object of its
// arguments and calls fn with both.
func (o *options) withObject(ctx context.Context, stderr io.Writer, fn func(s *session, ref objectRef) error) func(*cobra.Command, []string) error {
	return func(_ *cobra.Command, args []string) error {
		s, err := o.session(ctx, stderr)
		if err != nil {
			return err
		}
		defer s.close()
		ref, err := s.object(ctx, args)
		if err != nil {
			return err
		}
		return fn(s, ref)
	}
}

// useColor reports whether to colour what goes to w.
func (o *options) useColor(w io.Writer) bool {
	switch o.color {
	case "always":
		return true
	case "never":
		return false
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && os.Getenv("NO_COLOR") == ""
}

// openBrowser opens link with the platform's opener.
func openBrowser(ctx context.Context, link string) error {
	name, args := "xdg-open", []string{link}
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler", link}
	}
	if err := exec.CommandContext(ctx, name, args...).Start(); err != nil {
		return fmt.Errorf("open a browser (%s): %w; open the link above yourself", name, err)
	}
	return nil
}

// since formats a duration the way kubectl's AGE column does, to a tenth of a second below a
// minute.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// plural is the naive English plural of a lowercase kind, for when discovery is out of reach.
func plural(kind string) string {
	switch {
	case strings.HasSuffix(kind, "s"), strings.HasSuffix(kind, "x"), strings.HasSuffix(kind, "ch"), strings.HasSuffix(kind, "sh"):
		return kind + "es"
	case strings.HasSuffix(kind, "y") && !strings.HasSuffix(kind, "ay") && !strings.HasSuffix(kind, "ey"):
		return kind[:len(kind)-1] + "ies"
	}
	return kind + "s"
}
