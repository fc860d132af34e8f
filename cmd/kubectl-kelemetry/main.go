// Command kubectl-kelemetry is the kubectl plugin of Kelemetry: `kubectl kelemetry trace
// deployment/web` prints the object's trace as a tree in the terminal (its ReplicaSets and Pods
// under it, the critical path marked), `open` prints the web UI's link, `at` prints the object as
// it was at a moment. It finds Kelemetry by --server, by $KELEMETRY_URL, or by a port-forward to
// its Service through the kubeconfig, as kubectl port-forward does.
//
//	go install github.com/kelemetry/kelemetry/cmd/kubectl-kelemetry@latest
//	kubectl kelemetry trace deployment/web -n shop --since 2h
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "kubectl-kelemetry:", err)
		}
		os.Exit(1)
	}
}

// run runs the plugin with args; it prints results on stdout and progress on stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRootCommand(ctx, stdout, stderr)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}
