package cmd

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/kubectl-exalsius/internal/report"
)

// now is the clock the AGE columns and retry's timestamp read.
var now = time.Now

func newStatus(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "status [WORKSPACE...]",
		Short: "Phase, why, queue position and what is ahead, and URL of workspaces (every one of the namespace without names)",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			all, caps, _, notes, err := o.queueContext(ctx, ns)
			if err != nil {
				return err
			}
			var targets []*workspacesv1.WorkspaceDeployment
			if len(args) == 0 {
				for i := range all {
					if all[i].Namespace == ns {
						targets = append(targets, &all[i])
					}
				}
			}
			for _, name := range args {
				ws, err := o.getWorkspace(ctx, name)
				if err != nil {
					return err
				}
				targets = append(targets, ws)
			}
			out := make([]report.WorkspaceStatus, 0, len(targets))
			for _, ws := range targets {
				out = append(out, report.Status(ws, all, caps))
			}
			if o.output != outputTable {
				if len(args) == 1 {
					return printData(o.streams.Out, o.output, out[0])
				}
				return printData(o.streams.Out, o.output, out)
			}
			if len(out) == 0 {
				_, err := fmt.Fprintf(o.streams.ErrOut, "No workspaces found in %s namespace.\n", ns)
				return err
			}
			printNotes(o, notes)
			return printStatusTable(o, out)
		},
	}
}

// printStatusTable prints one row per workspace, then the waiters ahead of each waiting one.
func printStatusTable(o *options, rows []report.WorkspaceStatus) error {
	w := printers.GetNewTabWriter(o.streams.Out)
	_, _ = fmt.Fprintln(w, "NAME\tPHASE\tREADY\tREASON\tCLUSTER\tGPUS\tQUEUE\tURL")
	for _, s := range rows {
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, dash(s.Phase), s.Ready, dash(s.Reason), dash(s.Cluster),
			gpus(s), queue(s.Queue), dash(s.URL))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, s := range rows {
		if s.Queue == nil || len(s.Queue.Ahead) == 0 {
			continue
		}
		if _, err := fmt.Fprintf(o.streams.Out, "\nAhead of %s in the %s queue of %s:\n", s.Name, s.Queue.Kind, s.Queue.Queue); err != nil {
			return err
		}
		w := printers.GetNewTabWriter(o.streams.Out)
		_, _ = fmt.Fprintln(w, "POSITION\tWORKSPACE\tPRIORITY\tGPUS\tAGE")
		for i, a := range s.Queue.Ahead {
			_, _ = fmt.Fprintf(w, "%d\t%s/%s\t%d\t%d\t%s\n", i+1, a.Namespace, a.Name, a.Priority, a.GPUs, age(a.Created.Time))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// gpus is "admitted/requested", or "-" for a workspace without GPUs.
func gpus(s report.WorkspaceStatus) string {
	if s.GPUs == 0 && s.Requested == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", s.GPUs, s.Requested)
}

// queue is the position, with the queue's kind for a quota waiter.
func queue(q *report.QueuePosition) string {
	switch {
	case q == nil:
		return "-"
	case q.Kind == report.QueueQuota:
		return strconv.Itoa(q.Position) + " (quota)"
	}
	return strconv.Itoa(q.Position)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func age(t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now().Sub(t))
}

func printNotes(o *options, notes []string) {
	for _, n := range notes {
		_, _ = fmt.Fprintln(o.streams.ErrOut, "Note: "+n)
	}
}

func newOpen(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "open WORKSPACE",
		Short: "Print the workspace's URL (every URL with -o json|yaml)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, err := o.getWorkspace(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			urls := report.URLs(ws)
			if o.output != outputTable {
				return printData(o.streams.Out, o.output, map[string]any{"namespace": ws.Namespace, "name": ws.Name, "urls": urls})
			}
			if len(urls) == 0 {
				return fmt.Errorf("workspace %s/%s has no URL yet (phase %s)", ws.Namespace, ws.Name, dash(string(ws.Status.Phase)))
			}
			_, err = fmt.Fprintln(o.streams.Out, urls[0])
			return err
		},
	}
}

// newStop builds stop (stop true) or start: each sets spec.stopped (docs/stop-start.md).
func newStop(o *options, stop bool) *cobra.Command {
	use, short, done := "start WORKSPACE...", "Start stopped workspaces (spec.stopped: false)", "started"
	if stop {
		use, short, done = "stop WORKSPACE...", "Stop workspaces: scale to zero and free their GPUs, keep volumes and URLs (spec.stopped: true)", "stopped"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			patch, err := json.Marshal(map[string]any{"spec": map[string]any{"stopped": stop}})
			if err != nil {
				return err
			}
			return patchEach(o, cmd, args, patch, done)
		},
	}
}

func newRetry(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "retry WORKSPACE...",
		Short: "Ask the workspace-controller to retry Failed workspaces (sets the " + RetryAnnotation + " annotation to now)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
				RetryAnnotation: now().UTC().Format(time.RFC3339Nano)}}})
			if err != nil {
				return err
			}
			return patchEach(o, cmd, args, patch, "retry requested")
		},
	}
}

// patchEach merge-patches each named workspace under FieldManager and says so, as kubectl does.
func patchEach(o *options, cmd *cobra.Command, names []string, patch []byte, done string) error {
	c, err := o.connect()
	if err != nil {
		return err
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	for _, name := range names {
		ws, err := o.getWorkspace(cmd.Context(), name)
		if err != nil {
			return err
		}
		if err := c.Patch(cmd.Context(), ws, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); err != nil {
			return fmt.Errorf("patching workspace %s/%s: %w", ns, name, err)
		}
		if o.output != outputTable {
			if err := printData(o.streams.Out, o.output, ws); err != nil {
				return err
			}
			continue
		}
		if _, err := fmt.Fprintf(o.streams.Out, "workspacedeployment.workspaces.exalsius.ai/%s %s\n", name, done); err != nil {
			return err
		}
	}
	return nil
}

func newExplainWait(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "explain-wait WORKSPACE",
		Short: "Why a workspace is not running yet: its blocking conditions, the GPU gate's numbers, the waiters ahead and, in a cohort, who borrows",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, err := o.getWorkspace(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			all, caps, cohorts, notes, err := o.queueContext(cmd.Context(), ws.Namespace)
			if err != nil {
				return err
			}
			e := report.ExplainWait(ws, all, caps, cohorts)
			if o.output != outputTable {
				return printData(o.streams.Out, o.output, e)
			}
			printNotes(o, notes)
			for _, l := range e.Lines {
				if _, err := fmt.Fprintln(o.streams.Out, l); err != nil {
					return err
				}
			}
			return nil
		},
	}
}
