package main

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The bundle's names that become values.
const (
	bundleNamespace      = "fencedlease-system"
	bundleServiceAccount = "fencedlease-controller-manager"
)

// Sentinels put into the objects, turned into template actions after marshalling:
//
//	@@v:EXPR@@        {{ EXPR }} where it stands
//	@@incl:NAME@@     {{ include "NAME" . }} where it stands
//	@@int:EXPR@@      the whole value, unquoted: {{ EXPR }}
//	@@block:EXPR@@    the whole value: {{- toYaml EXPR | nindent N }} on the next line
//	@@inclblock:NAME@@  the whole value: {{- include "NAME" . | nindent N }} on the next line
//	@@if:EXPR:ITEM@@  a list item present only if EXPR
func v(expr string) string    { return "@@v:" + expr + "@@" }
func incl(name string) string { return "@@incl:" + name + "@@" }

// webhookMark is the annotation chartgen puts on the webhook component's objects (and
// takes off when it renders them).
const webhookMark = "chartgen.fencedlease.io/webhook"

func markWebhook(o *unstructured.Unstructured) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[webhookMark] = "true"
	o.SetAnnotations(a)
}

// isWebhook says whether o is the webhook component's, and unmarks it.
func isWebhook(o *unstructured.Unstructured) bool {
	a := o.GetAnnotations()
	_, marked := a[webhookMark]
	delete(a, webhookMark)
	if len(a) == 0 {
		a = nil
	}
	o.SetAnnotations(a)
	return marked
}

// render returns the chart file an object goes to ("" to leave it out) and its text.
func render(o *unstructured.Unstructured) (string, string, error) {
	kind, name := o.GetKind(), o.GetName()
	switch kind {
	case "Namespace":
		return "", "", nil // helm install -n NS --create-namespace; see the chart's README
	case "CustomResourceDefinition":
		raw, err := yaml.Marshal(o.Object)
		return "crds/" + name + ".yaml", string(raw), err
	}
	renameNamespace(o.Object)
	if err := renameServiceAccount(o); err != nil {
		return "", "", err
	}
	cond, orElse := "", ""
	switch {
	case isWebhook(o):
		cond = ".Values.webhook.enabled"
		if kind == "MutatingWebhookConfiguration" {
			if err := unstructured.SetNestedField(o.Object, "@@inclblock:fencedlease.webhookAnnotations@@", "metadata", "annotations"); err != nil {
				return "", "", err
			}
		}
	case kind == "Deployment":
		if err := deployment(o); err != nil {
			return "", "", err
		}
	case kind == "PodDisruptionBudget":
		cond = "gt (int .Values.replicas) 1"
	case kind == "Service" && strings.Contains(name, "metrics"):
		cond = ".Values.metrics.enabled"
	case kind == "Issuer" || kind == "Certificate":
		cond = "and .Values.webhook.enabled .Values.certManager.enabled"
	case kind == "MutatingAdmissionPolicy" || kind == "MutatingAdmissionPolicyBinding":
		// Kubernetes 1.36 and newer; before, the pod webhook admits candidates alone.
		cond = `.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/` + kind + `"`
		if kind == "MutatingAdmissionPolicy" && name == "fencedlease-candidate" {
			// Nothing would admit candidates: say so at install, not at the first pod.
			orElse = `{{- else if not .Values.webhook.enabled }}
{{- fail "this cluster serves no admissionregistration.k8s.io/v1 MutatingAdmissionPolicy (Kubernetes 1.36 and newer): set webhook.enabled=true, so the pod webhook admits candidates" }}
`
		}
	case kind == "ServiceMonitor":
		cond = "and .Values.metrics.enabled .Values.metrics.serviceMonitor.enabled"
	case kind == "PrometheusRule":
		cond = ".Values.metrics.prometheusRule.enabled"
	}
	raw, err := yaml.Marshal(o.Object)
	if err != nil {
		return "", "", err
	}
	text := string(raw)
	if kind == "PrometheusRule" {
		text = escapeActions(text) // the alerts' own templates are Prometheus's, not Helm's
	}
	body := expand(text)
	if cond != "" {
		body = "{{- if " + cond + " }}\n" + body + orElse + "{{- end }}\n"
	}
	file := strings.ToLower(kind) + "-" + strings.TrimPrefix(name, "fencedlease-") + ".yaml"
	return file, body, nil
}

// renameNamespace puts the release namespace wherever the bundle names its own.
func renameNamespace(x any) any {
	switch t := x.(type) {
	case map[string]any:
		for k, val := range t {
			t[k] = renameNamespace(val)
		}
	case []any:
		for i, val := range t {
			t[i] = renameNamespace(val)
		}
	case string:
		return strings.ReplaceAll(t, bundleNamespace, v(".Release.Namespace"))
	}
	return x
}

// renameServiceAccount puts the chart's service account wherever the bundle names the
// operator's: the account itself, the bindings' subjects, the FlowSchemas' subjects, the
// Deployment, and the admission policies' parameter (so the policies exempt the chart's
// operator).
func renameServiceAccount(o *unstructured.Unstructured) error {
	sa := incl("fencedlease.serviceAccountName")
	switch o.GetKind() {
	case "ServiceAccount":
		if o.GetName() == bundleServiceAccount {
			o.SetName(sa)
		}
	case "RoleBinding", "ClusterRoleBinding":
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range subjects {
			if m := s.(map[string]any); m["kind"] == "ServiceAccount" && m["name"] == bundleServiceAccount {
				m["name"] = sa
			}
		}
		return unstructured.SetNestedSlice(o.Object, subjects, "subjects")
	case "FlowSchema":
		rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "rules")
		for _, r := range rules {
			for _, s := range r.(map[string]any)["subjects"].([]any) {
				if acct, ok := s.(map[string]any)["serviceAccount"].(map[string]any); ok && acct["name"] == bundleServiceAccount {
					acct["name"] = sa
				}
			}
		}
		return unstructured.SetNestedSlice(o.Object, rules, "spec", "rules")
	case "ConfigMap":
		op, found, _ := unstructured.NestedString(o.Object, "data", "operator")
		if found {
			if !strings.HasSuffix(op, ":"+bundleServiceAccount) {
				return fmt.Errorf("the admission parameter names %q, not the operator's service account", op)
			}
			if err := unstructured.SetNestedField(o.Object, strings.TrimSuffix(op, bundleServiceAccount)+sa, "data", "operator"); err != nil {
				return err
			}
			// The mutating admission policy injects the agent the operator is told of.
			return unstructured.SetNestedField(o.Object, incl("fencedlease.agentImage"), "data", "agentImage")
		}
	}
	return nil
}

// deployment makes the operator's Deployment follow the values.
func deployment(o *unstructured.Unstructured) error {
	spec := o.Object["spec"].(map[string]any)
	spec["replicas"] = "@@int:.Values.replicas@@"
	pod := spec["template"].(map[string]any)["spec"].(map[string]any)
	pod["serviceAccountName"] = incl("fencedlease.serviceAccountName")
	pod["priorityClassName"] = v(".Values.priorityClassName")
	containers := pod["containers"].([]any)
	if len(containers) != 1 {
		return fmt.Errorf("want one container, found %d", len(containers))
	}
	c := containers[0].(map[string]any)
	c["image"] = incl("fencedlease.image")
	c["imagePullPolicy"] = v(".Values.image.pullPolicy")
	c["resources"] = "@@block:.Values.resources@@"
	for _, e := range c["env"].([]any) {
		if m := e.(map[string]any); m["name"] == "AGENT_IMAGE" {
			m["value"] = incl("fencedlease.agentImage")
		}
	}
	flags := map[string]string{
		"--leader-election-lease-duration": v(".Values.leaderElection.leaseDuration"),
		"--leader-election-renew-deadline": v(".Values.leaderElection.renewDeadline"),
		"--leader-election-retry-period":   v(".Values.leaderElection.retryPeriod"),
		"--metrics-bind-address":           incl("fencedlease.metricsBindAddress"),
	}
	var args []any
	seen := map[string]bool{}
	for _, a := range c["args"].([]any) {
		flag, _, _ := strings.Cut(a.(string), "=")
		if val, ok := flags[flag]; ok {
			a, seen[flag] = flag+"="+val, true
		}
		args = append(args, a)
	}
	for flag := range flags {
		if !seen[flag] {
			return fmt.Errorf("the manager has no %s argument to template", flag)
		}
	}
	args = append(args,
		"--metrics-secure="+v(".Values.metrics.secure"),
		"@@if:.Values.webhook.enabled:--webhook=true@@",
		"@@if:and .Values.webhook.enabled .Values.certManager.enabled:--webhook-cert-rotation=false@@")
	c["args"] = args
	return nil
}

// escapeActions makes Helm print {{ and }} literally.
func escapeActions(text string) string {
	text = strings.NewReplacer("{{", "\x00L", "}}", "\x00R").Replace(text)
	return strings.NewReplacer("\x00L", `{{ "{{" }}`, "\x00R", `{{ "}}" }}`).Replace(text)
}

var (
	blockLine = regexp.MustCompile(`^(\s*)(- )?([\w.-]+): '?@@(block|inclblock):(.+?)@@'?$`)
	ifItem    = regexp.MustCompile(`^(\s*)- '?@@if:([^:]+):(.+?)@@'?$`)
	intValue  = regexp.MustCompile(`'?@@int:(.+?)@@'?`)
	inline    = regexp.MustCompile(`@@v:(.+?)@@`)
	include   = regexp.MustCompile(`@@incl:(.+?)@@`)
)

// expand turns the sentinels of a marshalled object into template actions.
func expand(text string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(strings.TrimSuffix(text, "\n"), "\n") {
		if m := blockLine.FindStringSubmatch(line); m != nil {
			action := "toYaml " + m[5]
			if m[4] == "inclblock" {
				action = `include "` + m[5] + `" .`
			}
			fmt.Fprintf(&b, "%s%s%s:\n{{- %s | nindent %d }}\n", m[1], m[2], m[3], action, len(m[1])+len(m[2])+2)
			continue
		}
		if m := ifItem.FindStringSubmatch(line); m != nil {
			fmt.Fprintf(&b, "{{- if %s }}\n%s- %s\n{{- end }}\n", m[2], m[1], m[3])
			continue
		}
		line = intValue.ReplaceAllString(line, "{{ $1 }}")
		line = inline.ReplaceAllString(line, "{{ $1 }}")
		line = include.ReplaceAllString(line, `{{ include "$1" . }}`)
		b.WriteString(line + "\n")
	}
	return b.String()
}
