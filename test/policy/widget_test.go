package policy

import (
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// widgetGVK is a custom resource with a status subresource, as a singleton controller
// would write: its status writes drop metadata changes.
var widgetGVK = schema.GroupVersionKind{Group: "example.fencedlease.io", Version: "v1", Kind: "Widget"}

func installWidgetCRD() {
	open := &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.fencedlease.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: widgetGVK.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": *open, "status": *open},
				}},
			}},
		},
	}
	Expect(admin.Create(ctx, crd)).To(Succeed())
	Eventually(func() error {
		return admin.List(ctx, &unstructured.UnstructuredList{Object: map[string]any{
			"apiVersion": widgetGVK.GroupVersion().String(), "kind": "WidgetList"}})
	}).WithTimeout(20 * time.Second).Should(Succeed())
}

func newWidget(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}
