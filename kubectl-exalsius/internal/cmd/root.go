// Package cmd holds the commands of kubectl-exalsius: each reads WorkspaceDeployments, Colonies and
// WorkspaceQuotas with the user's kubeconfig, asks package report what to print, and prints it as a
// table or as JSON or YAML. stop, start and retry write one field each, under the field manager
// FieldManager.
package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	workspacesv1 "github.com/exalsius/exalsius-operator/common/api/workspaces/v1"
	"github.com/exalsius/exalsius-operator/common/scheme"
	"github.com/exalsius/exalsius-operator/kubectl-exalsius/internal/report"
)

// FieldManager is the field manager of what stop, start and retry write.
const FieldManager = "kubectl-exalsius"

// RetryAnnotation asks the workspace-controller to retry a Failed workspace once per new value (a
// timestamp, as Flux's reconcile.fluxcd.io/requestedAt).
const RetryAnnotation = workspacesv1.RetryRequestedAtAnnotation

// Output formats.
const (
	outputTable = ""
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// options are the flags every command shares and the client built from them.
type options struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	output  string
	client  client.Client
}

// NewRoot builds the kubectl-exalsius command.
func NewRoot(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{flags: genericclioptions.NewConfigFlags(true), streams: streams}
	root := &cobra.Command{
		Use:   "kubectl-exalsius",
		Short: "Workspaces and GPU fleets of the exalsius-operator, as their status says",
		Long: "kubectl-exalsius shows what the exalsius-operator records in the status of WorkspaceDeployments and\n" +
			"Colonies: why a workspace is not running, where it waits and what is ahead of it, its URL, and\n" +
			"a fleet's GPUs. Installed on PATH as kubectl-exalsius, it runs as `kubectl exalsius`.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if o.output != outputTable && o.output != outputJSON && o.output != outputYAML {
				return fmt.Errorf("--output %q: want json or yaml, or nothing for a table", o.output)
			}
			return nil
		},
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.flags.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml; a table when empty")
	root.AddCommand(newStatus(o), newOpen(o), newStop(o, true), newStop(o, false), newRetry(o), newFleet(o), newExplainWait(o))
	return root
}

// connect builds the client from the kubeconfig flags, once.
func (o *options) connect() (client.Client, error) {
	if o.client != nil {
		return o.client, nil
	}
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	o.client = c
	return c, nil
}

// namespace is --namespace, else the kubeconfig context's namespace, else default.
func (o *options) namespace() (string, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// getWorkspace reads one WorkspaceDeployment of the namespace.
func (o *options) getWorkspace(ctx context.Context, name string) (*workspacesv1.WorkspaceDeployment, error) {
	c, err := o.connect()
	if err != nil {
		return nil, err
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	ws := &workspacesv1.WorkspaceDeployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ws); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("workspace %s/%s not found", ns, name)
		}
		return nil, err
	}
	return ws, nil
}

// queueContext lists what a queue is derived from: the workspaces of every namespace (a cluster's
// queue spans tenants) and the WorkspaceQuotas' priority caps. A user who may not list them
// cluster-wide gets the namespace's workspaces and no caps; notes says so.
func (o *options) queueContext(ctx context.Context, ns string) (all []workspacesv1.WorkspaceDeployment, caps report.PriorityCaps, cohorts report.Cohorts, notes []string, err error) {
	if all, notes, err = o.listWorkspaces(ctx, ns); err != nil {
		return nil, nil, nil, nil, err
	}
	c, err := o.connect()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var quotas workspacesv1.WorkspaceQuotaList
	if err := c.List(ctx, &quotas); err != nil {
		if !apierrors.IsForbidden(err) {
			return nil, nil, nil, nil, fmt.Errorf("listing WorkspaceQuotas: %w", err)
		}
		notes = append(notes, "priorities are taken as written (listing WorkspaceQuotas is forbidden)")
		// The namespace's own quotas still say its cohort.
		if err := c.List(ctx, &quotas, client.InNamespace(ns)); err != nil && !apierrors.IsForbidden(err) {
			return nil, nil, nil, nil, fmt.Errorf("listing the WorkspaceQuotas of namespace %s: %w", ns, err)
		}
		return all, nil, report.CohortsOf(quotas.Items), notes, nil
	}
	return all, report.CapsOf(quotas.Items), report.CohortsOf(quotas.Items), notes, nil
}

// listWorkspaces lists the WorkspaceDeployments of every namespace, or of ns alone when the user may
// not list them cluster-wide (notes says so).
func (o *options) listWorkspaces(ctx context.Context, ns string) ([]workspacesv1.WorkspaceDeployment, []string, error) {
	c, err := o.connect()
	if err != nil {
		return nil, nil, err
	}
	var list workspacesv1.WorkspaceDeploymentList
	if err := c.List(ctx, &list); err == nil {
		return list.Items, nil, nil
	} else if !apierrors.IsForbidden(err) {
		return nil, nil, fmt.Errorf("listing WorkspaceDeployments: %w", err)
	}
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, nil, fmt.Errorf("listing WorkspaceDeployments of %s: %w", ns, err)
	}
	return list.Items, []string{"only the workspaces of namespace " + ns + " are counted (listing every namespace's is forbidden)"}, nil
}

// printData writes v as JSON or YAML.
func printData(w io.Writer, format string, v any) error {
	switch format {
	case outputJSON:
		b, err := json.MarshalIndent(v, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case outputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("unknown output format %q", format)
}
