package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/exalsius/exalsius-operator/common/api/infra/v1"
	"github.com/exalsius/exalsius-operator/kubectl-exalsius/internal/report"
)

func newFleet(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "fleet [COLONY]",
		Short: "GPUs per cluster and model of a Colony (every Colony of the namespace without a name): free, admitted, waiting",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := o.connect()
			if err != nil {
				return err
			}
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			var colonies []infrav1.Colony
			if len(args) == 1 {
				col := infrav1.Colony{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: args[0]}, &col); err != nil {
					if apierrors.IsNotFound(err) {
						return fmt.Errorf("colony %s/%s not found", ns, args[0])
					}
					return err
				}
				colonies = append(colonies, col)
			} else {
				var list infrav1.ColonyList
				if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
					return fmt.Errorf("listing Colonies of %s: %w", ns, err)
				}
				colonies = list.Items
			}
			all, notes, err := o.listWorkspaces(ctx, ns)
			if err != nil {
				return err
			}
			rows := []report.FleetRow{}
			for i := range colonies {
				rows = append(rows, report.Fleet(&colonies[i], all)...)
			}
			if o.output != outputTable {
				return printData(o.streams.Out, o.output, rows)
			}
			if len(rows) == 0 {
				_, err := fmt.Fprintf(o.streams.ErrOut, "No GPUs found in the Colonies of %s namespace.\n", ns)
				return err
			}
			printNotes(o, notes)
			w := printers.GetNewTabWriter(o.streams.Out)
			_, _ = fmt.Fprintln(w, "COLONY\tCLUSTER\tREACHABLE\tVENDOR\tMODEL\tTOTAL\tALLOCATED\tFREE\tADMITTED\tWAITING")
			for _, r := range rows {
				_, _ = fmt.Fprintf(w, "%s\t%s\t%t\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", r.Colony, r.Cluster, r.Reachable, r.Vendor, dash(r.Model),
					r.Total, r.Allocated, r.Free, r.Admitted, r.Waiting)
			}
			return w.Flush()
		},
	}
}
