package podwebhook

import (
	"encoding/json"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// patchFor is the JSON patch from before to after (after = mutate(before)) that names
// only fields our compiled types know, so a field the API server sent that they lack (a
// newer API server's) is never removed. Both sides are our typed view: fields we do not
// know are on neither, so no operation touches them. The agent, which mutate puts first
// among the init containers, is inserted by an explicit add at index 0: a diff of the
// shifted list would rewrite every init container from our typed view.
func patchFor(before, after *corev1.Pod) ([]jsonpatch.Operation, error) {
	before = before.DeepCopy()
	var ops []jsonpatch.Operation
	if findContainer(before.Spec.InitContainers, fencingv1.AgentContainerName) < 0 &&
		findContainer(after.Spec.InitContainers, fencingv1.AgentContainerName) == 0 {
		agent := after.Spec.InitContainers[0]
		if len(before.Spec.InitContainers) == 0 {
			ops = append(ops, jsonpatch.NewOperation("add", "/spec/initContainers", []corev1.Container{agent}))
		} else {
			ops = append(ops, jsonpatch.NewOperation("add", "/spec/initContainers/0", agent))
		}
		before.Spec.InitContainers = append([]corev1.Container{agent}, before.Spec.InitContainers...)
	}
	from, err := json.Marshal(before)
	if err != nil {
		return nil, err
	}
	to, err := json.Marshal(after)
	if err != nil {
		return nil, err
	}
	rest, err := jsonpatch.CreatePatch(from, to)
	if err != nil {
		return nil, err
	}
	return append(ops, rest...), nil
}
