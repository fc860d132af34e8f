package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// change is one entry of GET /api/changes.
type change struct {
	Time   time.Time `json:"time"`
	Object struct {
		Cluster, Group, Resource, Namespace, Name string
	} `json:"object"`
	User         string   `json:"user"`
	Impersonator string   `json:"impersonator"`
	UserKind     string   `json:"userKind"`
	Verb         string   `json:"verb"`
	Subresource  string   `json:"subresource"`
	Code         int      `json:"code"`
	Paths        []string `json:"paths"`
	Diff         []string `json:"diff"`
}

// changesFlags are the flags of the changes command.
type changesFlags struct {
	since, until     string
	user, outcome    string
	userKinds, verbs []string
	limit            int
	follow, diff     bool
}

func (o *options) newChangesCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	f := &changesFlags{}
	cmd := &cobra.Command{
		Use:   "changes [KIND[/NAME]]",
		Short: "List what changed across the cluster, newest first: who wrote which object, and which fields",
		Long: "changes lists the writes Kelemetry recorded (create, update, patch, delete), newest first:\n" +
			"when, who (and what kind of user: person, controller, node), the verb, the object, the\n" +
			"response code and the fields that changed. Without -n it covers every namespace.\n" +
			"--follow prints the matching writes as they are stored, oldest first, until Ctrl-C.",
		Example: "  kubectl kelemetry changes --since 15m\n" +
			"  kubectl kelemetry changes -n shop --user-kind person\n" +
			"  kubectl kelemetry changes deployments --verb patch,delete --follow\n" +
			"  kubectl kelemetry changes deployment/web --since 2h --diff",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.session(ctx, stderr)
			if err != nil {
				return err
			}
			defer s.close()
			q := url.Values{"since": {f.since}}
			if f.until != "" {
				q.Set("until", f.until)
			}
			for k, v := range map[string]string{"user": f.user, "outcome": f.outcome, "userKind": strings.Join(f.userKinds, ","), "verb": strings.Join(f.verbs, ",")} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if len(args) == 1 {
				kind, name, _ := strings.Cut(args[0], "/")
				pair := []string{kind, "x"}
				ref, err := s.object(ctx, pair)
				if err != nil {
					return err
				}
				q.Set("group", ref.Group)
				q.Set("resource", ref.Resource)
				if name != "" {
					q.Set("name", name)
				}
			}
			if cmd.Flags().Changed("namespace") {
				q.Set("namespace", o.namespace)
			}
			cluster, err := s.clusterName(ctx)
			if err != nil {
				return err
			}
			q.Set("cluster", cluster)
			if f.diff {
				q.Set("diff", "1")
			}
			color := o.useColor(stdout)
			if f.follow {
				return followChanges(ctx, s.api, q, stdout, color)
			}
			q.Set("limit", strconv.Itoa(f.limit))
			var resp struct {
				Data []change `json:"data"`
				More bool     `json:"more"`
			}
			if err := s.api.getJSON(ctx, "/api/changes", q, &resp); err != nil {
				return err
			}
			if len(resp.Data) == 0 {
				_, err := fmt.Fprintf(stdout, "no changes since %s\n", f.since)
				return err
			}
			if err := renderChanges(stdout, resp.Data, time.Now(), color); err != nil {
				return err
			}
			if resp.More {
				fmt.Fprintf(stderr, "more than %d changes: narrow the filters, shorten --since or raise --limit\n", f.limit)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.since, "since", "15m", "how far back: a duration (15m, 2h) or a time (RFC 3339)")
	fl.StringVar(&f.until, "until", "", "up to this time (RFC 3339; default now)")
	fl.StringVar(&f.user, "user", "", "only this user's writes (or those it impersonated)")
	fl.StringSliceVar(&f.userKinds, "user-kind", nil, "only writes by person, controller or node (comma-separated)")
	fl.StringSliceVar(&f.verbs, "verb", nil, "only these verbs: create, update, patch, delete, deletecollection")
	fl.StringVar(&f.outcome, "outcome", "", "ok or failed")
	fl.IntVar(&f.limit, "limit", 100, "at most this many changes")
	fl.BoolVar(&f.follow, "follow", false, "print the matching changes as they are stored, until Ctrl-C")
	fl.BoolVarP(&f.diff, "diff", "d", false, "print each change's field diff under it")
	return cmd
}

// changeCells are the table cells of a change.
func changeCells(c *change, now time.Time) []string {
	obj := c.Object.Resource
	if c.Object.Group != "" {
		obj += "." + c.Object.Group
	}
	obj += "/" + c.Object.Name
	if c.Subresource != "" {
		obj += " (" + c.Subresource + ")"
	}
	user := c.User
	if rest, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		// kube-system:deployment-controller: the KIND column says it is a controller.
		if _, name, ok := strings.Cut(rest, ":"); ok {
			user = name
		}
	}
	if c.Impersonator != "" {
		user += " (by " + c.Impersonator + ")"
	}
	changed := strings.Join(c.Paths, ",")
	if len(changed) > 60 {
		changed = changed[:57] + "..."
	}
	ns := c.Object.Namespace
	if ns == "" {
		ns = "-"
	}
	return []string{c.Time.UTC().Format("15:04:05.000"), shortDuration(now.Sub(c.Time)), user, c.UserKind, c.Verb, obj, ns, strconv.Itoa(c.Code), changed}
}

var changeHeader = []string{"TIME", "AGE", "USER", "KIND", "VERB", "OBJECT", "NAMESPACE", "CODE", "CHANGED"}

// renderChanges prints changes as a table, newest first as listed; a change's diff lines, when
// asked for, follow it indented (the table is then one block per change).
func renderChanges(w io.Writer, cs []change, now time.Time, color bool) error {
	rows := []row{{cells: changeHeader, color: bold}}
	withDiff := false
	for i := range cs {
		r := row{cells: changeCells(&cs[i], now)}
		if cs[i].Code >= 300 {
			r.color = red
		}
		rows = append(rows, r)
		withDiff = withDiff || len(cs[i].Diff) > 0
	}
	if !withDiff {
		return writeTable(w, rows, color)
	}
	for i := range cs {
		if err := writeTable(w, []row{rows[0], rows[i+1]}, color); err != nil {
			return err
		}
		for _, d := range cs[i].Diff {
			if _, err := fmt.Fprintln(w, "    "+d); err != nil {
				return err
			}
		}
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
	}
	return nil
}

// followWidths are the column widths of the live tail, which cannot measure its rows ahead.
var followWidths = []int{12, 6, 40, 10, 16, 48, 20, 4, 0}

// writeFollowRow writes one row of the live tail with followWidths.
func writeFollowRow(w io.Writer, cells []string, diff []string, colorCode string, color bool) error {
	var b strings.Builder
	if color && colorCode != "" {
		b.WriteString(colorCode)
	}
	for i, c := range cells {
		b.WriteString(c)
		if pad := followWidths[i] - len([]rune(c)); i < len(cells)-1 {
			b.WriteString(strings.Repeat(" ", max(pad, 0)+2))
		}
	}
	if color && colorCode != "" {
		b.WriteString(reset)
	}
	b.WriteString("\n")
	for _, d := range diff {
		b.WriteString("    " + d + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// followChanges prints the live tail of GET /api/changes?follow=1 until ctx ends or the API cuts
// it off.
func followChanges(ctx context.Context, api *apiClient, q url.Values, w io.Writer, color bool) error {
	q.Set("follow", "1")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api.base+"/api/changes?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	if api.token != "" {
		req.Header.Set("Authorization", "Bearer "+api.token)
	}
	client := *api.http
	client.Timeout = 0 // a tail lasts
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("ask Kelemetry at %s: %w", api.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return fmt.Errorf("the API answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	if err := writeFollowRow(w, changeHeader, nil, bold, color); err != nil {
		return err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "error":
			return fmt.Errorf("the live tail ended: %s", strings.TrimPrefix(line, "data: "))
		case strings.HasPrefix(line, "data: "):
			var c change
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &c); err != nil {
				return fmt.Errorf("decode a change: %w", err)
			}
			code := ""
			if c.Code >= 300 {
				code = red
			}
			if err := writeFollowRow(w, changeCells(&c, time.Now()), c.Diff, code, color); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("read the live tail: %w", err)
	}
	return ctx.Err()
}
