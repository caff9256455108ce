package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
)

// output is the -o flag: "" for the human view, json or yaml for the data behind it.
type output string

func (f *output) bind(cmd *cobra.Command) {
	cmd.Flags().StringVarP((*string)(f), "output", "o", "", "Output format: json or yaml (default: text for people).")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
}

func (f output) validate() error {
	switch f {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("unknown output format %q: use json or yaml", string(f))
}

// print writes v as f asks, or calls text for the human view.
func (f output) print(w io.Writer, v any, text func(io.Writer) error) error {
	switch f {
	case "json":
		b, err := json.MarshalIndent(v, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return text(w)
}

// printObject prints a FencedLease as kubectl get -o json|yaml does.
func (f output) printObject(w io.Writer, fl *fencingv1.FencedLease) error {
	fl.SetGroupVersionKind(fencingv1.GroupVersion.WithKind("FencedLease"))
	return f.print(w, fl, nil)
}

// ago is a duration as people read it: 850ms, 4.2s, 3m12s, 5h3m, 2d4h.
func ago(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + ago(-d)
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%dm", d/time.Hour, (d%time.Hour)/time.Minute)
	}
	days := d / (24 * time.Hour)
	return fmt.Sprintf("%dd%dh", days, (d-days*24*time.Hour)/time.Hour)
}
