package fence

import (
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// FencedLabel "true" opts a Kubernetes object into the token check of the
	// ValidatingAdmissionPolicy in config/fence.
	FencedLabel = "fencing.fencedlease.io/fenced"
	// TokenAnnotation carries the token of the write that last changed the object.
	TokenAnnotation = "fencing.fencedlease.io/token"
)

// Stamp marks obj as written with token and opts it into the object fence, so an update
// carrying an older token is refused by the API server. Call it on every write.
func Stamp(obj metav1.Object, token int64) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[FencedLabel] = "true"
	obj.SetLabels(labels)
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[TokenAnnotation] = strconv.FormatInt(token, 10)
	obj.SetAnnotations(annotations)
}
