// Package policy embeds the admission policies, so the binary can install them on the
// embedded local control plane and tests can load them without a path.
package policy

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// ParamsName is the parameter ConfigMap every binding reads.
const ParamsName = "fencedlease-admission-params"

// Objects returns the objects of config/policy as written (the kustomization aside), with
// the parameter naming operator as the operator's user and agentImage as the image of the
// agent sidecar.
func Objects(operator, agentImage string) ([]*unstructured.Unstructured, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, name := range names {
		if name == "kustomization.yaml" || name == "agent_image.yaml" {
			continue
		}
		raw, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			obj := map[string]any{}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if len(obj) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: obj}
			if u.GetKind() == "ConfigMap" && u.GetName() == ParamsName {
				if err := unstructured.SetNestedField(u.Object, operator, "data", "operator"); err != nil {
					return nil, err
				}
				if err := unstructured.SetNestedField(u.Object, agentImage, "data", "agentImage"); err != nil {
					return nil, err
				}
			}
			out = append(out, u)
		}
	}
	return out, nil
}
