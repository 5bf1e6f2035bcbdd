// helm-render: renders a Helm chart's templates offline, as `helm template`
// does, for charts that keep to Go templates, Sprig and Helm's own include,
// tpl, required, toYaml, fromYaml, toJson, fromJson and lookup (which, as
// under `helm template`, finds nothing). Helm itself is not packaged for
// Debian 12; this is built from Debian's Go, Sprig and yaml packages
// (deploy/CMakeLists.txt) so that deploy/validate can check what the chart
// renders (deploy/README.md).
//
// Usage: helm-render [--release NAME] [--namespace NS] [-f VALUES]... [--notes] CHART
//   prints the rendered manifests (each after "# Source: CHART/templates/FILE"),
//   or with --notes the rendered NOTES.txt. Values files merge over
//   values.yaml as Helm merges them (maps key by key, anything else replaces).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	yaml2 "gopkg.in/yaml.v2"
	yaml3 "gopkg.in/yaml.v3"
)

type valueFiles []string

func (v *valueFiles) String() string     { return strings.Join(*v, ",") }
func (v *valueFiles) Set(s string) error { *v = append(*v, s); return nil }

// readYAML parses YAML into JSON-shaped values (map[string]interface{},
// []interface{}, float64...), as Helm's sigs.k8s.io/yaml does.
func readYAML(data []byte) (map[string]interface{}, error) {
	var raw interface{}
	if err := yaml3.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	if raw == nil {
		return map[string]interface{}{}, nil
	}
	j, err := json.Marshal(jsonable(raw))
	if err != nil {
		return nil, err
	}
	out := map[string]interface{}{}
	if err := json.Unmarshal(j, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func jsonable(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		for k, e := range t {
			t[k] = jsonable(e)
		}
		return t
	case map[interface{}]interface{}:
		m := map[string]interface{}{}
		for k, e := range t {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []interface{}:
		for i, e := range t {
			t[i] = jsonable(e)
		}
		return t
	}
	return v
}

func merge(base, over map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		b, bok := out[k].(map[string]interface{})
		o, ook := v.(map[string]interface{})
		if bok && ook {
			out[k] = merge(b, o)
		} else if v == nil {
			delete(out, k) // null removes a default, as in Helm
		} else {
			out[k] = v
		}
	}
	return out
}

func toYAML(v interface{}) string {
	data, err := yaml2.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

func main() {
	release := flag.String("release", "somm", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	notes := flag.Bool("notes", false, "print the rendered NOTES.txt instead")
	var files valueFiles
	flag.Var(&files, "f", "a values file (repeatable)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: helm-render [--release NAME] [--namespace NS] [-f VALUES]... [--notes] CHART")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *release, *namespace, files, *notes); err != nil {
		fmt.Fprintln(os.Stderr, "helm-render:", err)
		os.Exit(1)
	}
}

func run(chart, release, namespace string, files []string, notes bool) error {
	chartYAML, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		return err
	}
	meta, err := readYAML(chartYAML)
	if err != nil {
		return fmt.Errorf("Chart.yaml: %w", err)
	}
	valuesYAML, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		return err
	}
	values, err := readYAML(valuesYAML)
	if err != nil {
		return fmt.Errorf("values.yaml: %w", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		over, err := readYAML(data)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		values = merge(values, over)
	}
	if _, ok := values["global"]; !ok {
		values["global"] = map[string]interface{}{}
	}
	name := fmt.Sprint(meta["name"])
	top := map[string]interface{}{
		"Values": values,
		"Release": map[string]interface{}{
			"Name": release, "Namespace": namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Chart": map[string]interface{}{
			"Name": meta["name"], "Version": meta["version"], "AppVersion": meta["appVersion"],
			"Description": meta["description"], "KubeVersion": meta["kubeVersion"],
		},
		"Capabilities": map[string]interface{}{
			"KubeVersion": map[string]interface{}{"Version": "v1.30.0", "Major": "1", "Minor": "30"},
		},
	}

	paths, err := filepath.Glob(filepath.Join(chart, "templates", "*"))
	if err != nil {
		return err
	}
	sort.Strings(paths)
	root := template.New("root").Option("missingkey=zero")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	funcs["toYaml"] = toYAML
	funcs["toJson"] = func(v interface{}) string { b, _ := json.Marshal(v); return string(b) }
	funcs["fromYaml"] = func(s string) map[string]interface{} { m, _ := readYAML([]byte(s)); return m }
	funcs["fromJson"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		_ = json.Unmarshal([]byte(s), &m)
		return m
	}
	funcs["include"] = func(string, interface{}) (string, error) { return "", nil }
	funcs["tpl"] = func(string, interface{}) (string, error) { return "", nil }
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return nil, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, errors.New(msg)
		}
		return v, nil
	}
	funcs["fail"] = func(msg string) (string, error) { return "", errors.New(msg) }
	funcs["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	root.Funcs(funcs)
	funcs["include"] = func(tname string, data interface{}) (string, error) {
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, tname, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	root.Funcs(funcs)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		tname := name + "/templates/" + filepath.Base(p)
		if _, err := root.New(tname).Parse(string(data)); err != nil {
			return err
		}
	}
	var out strings.Builder
	for _, p := range paths {
		base := filepath.Base(p)
		isNotes := base == "NOTES.txt"
		if strings.HasPrefix(base, "_") || isNotes != notes {
			continue
		}
		tname := name + "/templates/" + base
		top["Template"] = map[string]interface{}{"Name": tname, "BasePath": name + "/templates"}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, tname, top); err != nil {
			return err
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if notes {
			out.WriteString(text)
			continue
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", tname, text)
	}
	fmt.Print(out.String())
	return nil
}
