package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/internal/configfile"
	"github.com/kelemetry/kelemetry/internal/version"
)

// errReported is returned by a command that already told the user what went wrong (validate's
// problems): main exits 1 without printing it again.
var errReported = errors.New("reported")

// normalizeArgs turns the single-dash long flags of earlier releases (-config, -data-dir, as Go's
// flag package reads them) into the double-dash form, up to a "--".
func normalizeArgs(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			out[i] = "-" + a
		}
	}
	return out
}

// newRootCommand builds the kelemetry command: serve (the default), validate, print-config and
// version. The configuration flags are every command's; stdout takes what a command prints on
// purpose (the configuration, the version), stderr the logs and the help.
func newRootCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	var pprofAddr string
	fs, build := newFlagSet(stderr, &pprofAddr)
	cobra.EnableCommandSorting = false // serve first, as added
	root := &cobra.Command{
		Use:   "kelemetry",
		Short: "Kelemetry traces the Kubernetes control plane",
		Long: "Kelemetry turns the audit log, Events and object changes of Kubernetes clusters into traces,\n" +
			"one per object, linked across owners, and serves them (web UI, Jaeger APIs).",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(ctx, fs, build, pprofAddr, stdout, stderr)
		},
	}
	root.PersistentFlags().AddFlagSet(fs)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return flagError(cmd, err) })
	root.CompletionOptions.DisableDefaultCmd = true

	root.AddCommand(&cobra.Command{
		Use:   "serve",
		Short: "Run Kelemetry: ingest, trace, store and serve (the default command)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(ctx, fs, build, pprofAddr, stdout, stderr)
		},
	}, &cobra.Command{
		Use:   "validate",
		Short: "Check the configuration (--config, the flags, --set) and print every problem, one a line",
		Long: "validate reads the configuration as serve would and prints every problem on its own line\n" +
			"(file:line: key: what to do), then exits 1; a valid configuration prints \"configuration OK\".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := build(true)
			if err == nil {
				err = checkFiles(cfg)
			}
			if err != nil {
				for _, line := range strings.Split(err.Error(), "\n") {
					fmt.Fprintln(stdout, line)
				}
				return errReported
			}
			_, err = fmt.Fprintln(stdout, "configuration OK")
			return err
		},
	}, &cobra.Command{
		Use:   "print-config",
		Short: "Print the effective configuration (defaults, file, flags, --set) as YAML, without checking the files it names",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := build(false)
			if err != nil {
				return err
			}
			out, err := effectiveYAML(cfg)
			if err != nil {
				return err
			}
			_, err = stdout.Write(out)
			return err
		},
	}, newReplayCommand(ctx, build, stdout, stderr), &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit of this build",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(stdout, version.Get().String())
			return err
		},
	})
	for _, c := range root.Commands() {
		c.SilenceUsage, c.SilenceErrors = true, true
		c.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return flagError(cmd, err) })
	}
	root.SetUsageFunc(func(cmd *cobra.Command) error { return printHelp(cmd.ErrOrStderr(), cmd, fs) })
	root.SetHelpFunc(func(cmd *cobra.Command, _ []string) { _ = printHelp(cmd.OutOrStdout(), cmd, fs) })
	return root
}

// flagError turns a parse error into one line a person can act on: an unknown flag names the
// closest one.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		name, _, _ := strings.Cut(rest, "=")
		var names []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
		if best, ok := configfile.Closest(name, names); ok {
			return fmt.Errorf("unknown flag --%s; did you mean --%s? (kelemetry --help lists the flags)", name, best)
		}
		return fmt.Errorf("unknown flag --%s (kelemetry --help lists the flags)", name)
	}
	return fmt.Errorf("%s (kelemetry --help lists the flags)", msg)
}

// printHelp prints cmd's help: its description, usage, commands, and the flags by section.
func printHelp(w io.Writer, cmd *cobra.Command, fs *pflag.FlagSet) error {
	var b strings.Builder
	if cmd.Long != "" {
		b.WriteString(cmd.Long + "\n\n")
	} else if cmd.Short != "" {
		b.WriteString(cmd.Short + "\n\n")
	}
	b.WriteString("Usage:\n  " + cmd.UseLine())
	if cmd.HasAvailableSubCommands() {
		b.WriteString("\n  " + cmd.CommandPath() + " COMMAND [flags]")
	}
	b.WriteString("\n")
	if cmd.HasAvailableSubCommands() {
		b.WriteString("\nCommands:\n")
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				fmt.Fprintf(&b, "  %-13s %s\n", c.Name(), c.Short)
			}
		}
	}
	bySection := map[string]*pflag.FlagSet{}
	all := pflag.NewFlagSet("all", pflag.ContinueOnError)
	all.SortFlags = false
	all.AddFlagSet(fs)
	all.AddFlagSet(cmd.LocalNonPersistentFlags())
	all.VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return // said once below
		}
		sec := "Other"
		if v := f.Annotations[sectionAnnotation]; len(v) > 0 {
			sec = v[0]
		}
		if bySection[sec] == nil {
			bySection[sec] = pflag.NewFlagSet(sec, pflag.ContinueOnError)
			bySection[sec].SortFlags = false
		}
		bySection[sec].AddFlag(f)
	})
	names := make([]string, 0, len(sections)+1)
	for _, s := range sections {
		names = append(names, s.name)
	}
	if bySection["Other"] != nil {
		names = append(names, "Other")
	}
	for _, name := range names {
		if s := bySection[name]; s != nil {
			fmt.Fprintf(&b, "\n%s flags:\n%s", name, s.FlagUsagesWrapped(100))
		}
	}
	b.WriteString("\nSizes take units (512Mi, 10Gi), durations too (30s, 168h). Every key of the YAML file:\n" +
		"docs/reference/config.md; every flag: docs/reference/cli.md. -h, --help: this help; with a\n" +
		"command, that command's.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// checkFiles reports input files the configuration names that cannot be read: a replay that would
// ingest nothing is a mistake to stop at, not a log line behind an empty UI.
func checkFiles(cfg kelemetry.Config) error {
	var errs []error
	check := func(flag string, paths []string) {
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", flag, p, unwrapPath(err)))
			}
		}
	}
	check("--replay", cfg.Audit.Replay)
	check("--replay-events", cfg.Event.Replay)
	return errors.Join(errs...)
}

// unwrapPath drops the path an *os.PathError repeats.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// secretKeys are the keys whose values print-config hides.
var secretKeys = map[string]bool{"password": true}

// effectiveYAML renders the configuration with its defaults filled in, secrets hidden.
func effectiveYAML(cfg kelemetry.Config) ([]byte, error) {
	var n yaml.Node
	if err := n.Encode(cfg.WithDefaults()); err != nil {
		return nil, fmt.Errorf("print-config: %w", err)
	}
	hideSecrets(&n)
	return configfile.Marshal(&n)
}

func hideSecrets(n *yaml.Node) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if secretKeys[n.Content[i].Value] && n.Content[i+1].Value != "" {
				n.Content[i+1] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "<hidden>"}
			}
		}
	}
	for _, c := range n.Content {
		hideSecrets(c)
	}
}
