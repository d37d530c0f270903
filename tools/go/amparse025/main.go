// Command amparse025 is amparse built against Alertmanager v0.25.0, the floor obs-iac
// supports (alertmanager_min_version). That release has only the classic matcher parser
// (pkg/labels.ParseMatchers), so every output carries "classic" and, as there, "fallback"
// is the classic result. Same stdin/stdout protocol and flags as amparse; -mode is
// accepted for symmetry and must be "fallback" or "classic".
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/prometheus/alertmanager/config"
	"github.com/prometheus/alertmanager/pkg/labels"
	"gopkg.in/yaml.v2"
)

type matcher struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

type result struct {
	Matchers []matcher `json:"matchers"`
	Error    *string   `json:"error"`
}

func convert(ms []*labels.Matcher, err error) result {
	if err != nil {
		text := err.Error()
		return result{Matchers: []matcher{}, Error: &text}
	}
	out := []matcher{}
	for _, m := range ms {
		out = append(out, matcher{Name: m.Name, Type: m.Type.String(), Value: m.Value})
	}
	return result{Matchers: out}
}

func lines() error {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var text string
		if err := json.Unmarshal(in.Bytes(), &text); err != nil {
			return fmt.Errorf("stdin line is not a JSON string: %w", err)
		}
		classic := convert(labels.ParseMatchers(text))
		if err := out.Encode(map[string]any{"input": text, "classic": classic, "fallback": classic}); err != nil {
			return err
		}
	}
	return in.Err()
}

func loadConfig() error {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	cfg, err := config.Load(string(raw))
	if err != nil {
		return err
	}
	rules := []map[string]any{}
	for _, r := range cfg.InhibitRules {
		equal := []string{}
		for _, e := range r.Equal {
			equal = append(equal, string(e))
		}
		rules = append(rules, map[string]any{
			"source_matchers": convert(r.SourceMatchers, nil).Matchers,
			"target_matchers": convert(r.TargetMatchers, nil).Matchers,
			"equal":           equal,
		})
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"inhibit_rules": rules})
}

func yamlStrings() error {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	var values []string
	if err := yaml.UnmarshalStrict(raw, &values); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(values)
}

func main() {
	cfg := flag.Bool("config", false, "load an alertmanager.yml from stdin and print its inhibit rules")
	mode := flag.String("mode", "fallback", "fallback or classic (the same parser in v0.25)")
	asYAML := flag.Bool("yaml", false, "decode a YAML sequence of strings from stdin")
	flag.Parse()
	var err error
	switch {
	case *mode != "fallback" && *mode != "classic":
		err = fmt.Errorf("v0.25 has no %q matcher parser", *mode)
	case *cfg:
		err = loadConfig()
	case *asYAML:
		err = yamlStrings()
	default:
		err = lines()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "amparse025:", err)
		os.Exit(1)
	}
}
