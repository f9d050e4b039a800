package bootstrap

import (
	"context"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/exalsius/exalsius-operator/common/conditions"
)

// newClient is the managers' client: controller-runtime's, whose status writes (Update and Patch of
// the status subresource) cut condition messages to conditions.MaxMessageBytes first. A message
// built from many inputs then never fails a status write against the CRDs' bound, whichever
// component builds it and however it writes (common/status.Apply cuts its own).
func newClient(config *rest.Config, options client.Options) (client.Client, error) {
	c, err := client.New(config, options)
	if err != nil {
		return nil, err
	}
	return cuttingClient{Client: c}, nil
}

type cuttingClient struct{ client.Client }

// Status implements client.Client.
func (c cuttingClient) Status() client.SubResourceWriter {
	return cuttingWriter{SubResourceWriter: c.Client.Status()}
}

// SubResource implements client.Client.
func (c cuttingClient) SubResource(name string) client.SubResourceClient {
	sc := c.Client.SubResource(name)
	if name != "status" {
		return sc
	}
	return cuttingSubResource{SubResourceClient: sc}
}

type cuttingWriter struct{ client.SubResourceWriter }

func (w cuttingWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	conditions.CutObject(obj)
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

// Patch cuts obj's messages before the patch is computed from it (a merge patch from a base diffs
// the cut object).
func (w cuttingWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	conditions.CutObject(obj)
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

type cuttingSubResource struct{ client.SubResourceClient }

func (s cuttingSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	conditions.CutObject(obj)
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s cuttingSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	conditions.CutObject(obj)
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}
