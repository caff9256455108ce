package leadership

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Fence is what writes are checked against: a Guard, or one Term of it.
type Fence interface {
	// Client returns c with every write refused while the fence does not allow it.
	Client(c client.Client) client.Client
}

// refuser says whether a write may go ahead (nil) or why not, counting refusals.
type refuser interface{ refuse() error }

// Client returns c with every write refused (ErrNotLeader) while leadership is not
// certain. Reads pass: they decide nothing.
func (g *Guard) Client(c client.Client) client.Client { return &guardedClient{Client: c, g: g} }

type guardedClient struct {
	client.Client
	g refuser
}

func (c *guardedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.g.refuse(); err != nil {
		return err
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c *guardedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.g.refuse(); err != nil {
		return err
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c *guardedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.g.refuse(); err != nil {
		return err
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *guardedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := c.g.refuse(); err != nil {
		return err
	}
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *guardedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := c.g.refuse(); err != nil {
		return err
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *guardedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if err := c.g.refuse(); err != nil {
		return err
	}
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

func (c *guardedClient) Status() client.SubResourceWriter {
	return &guardedWriter{SubResourceWriter: c.Client.Status(), g: c.g}
}

func (c *guardedClient) SubResource(name string) client.SubResourceClient {
	return &guardedSubResource{SubResourceClient: c.Client.SubResource(name), g: c.g}
}

type guardedWriter struct {
	client.SubResourceWriter
	g refuser
}

func (w *guardedWriter) Create(ctx context.Context, obj client.Object, sub client.Object, opts ...client.SubResourceCreateOption) error {
	if err := w.g.refuse(); err != nil {
		return err
	}
	return w.SubResourceWriter.Create(ctx, obj, sub, opts...)
}

func (w *guardedWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := w.g.refuse(); err != nil {
		return err
	}
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

func (w *guardedWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := w.g.refuse(); err != nil {
		return err
	}
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (w *guardedWriter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if err := w.g.refuse(); err != nil {
		return err
	}
	return w.SubResourceWriter.Apply(ctx, obj, opts...)
}

type guardedSubResource struct {
	client.SubResourceClient
	g refuser
}

func (s *guardedSubResource) Create(ctx context.Context, obj client.Object, sub client.Object, opts ...client.SubResourceCreateOption) error {
	if err := s.g.refuse(); err != nil {
		return err
	}
	return s.SubResourceClient.Create(ctx, obj, sub, opts...)
}

func (s *guardedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.g.refuse(); err != nil {
		return err
	}
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s *guardedSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.g.refuse(); err != nil {
		return err
	}
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

func (s *guardedSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if err := s.g.refuse(); err != nil {
		return err
	}
	return s.SubResourceClient.Apply(ctx, obj, opts...)
}
