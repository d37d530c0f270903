// Command amparse shows what Alertmanager (v0.35) makes of matcher strings and configs,
// using Alertmanager's own parsing packages, so obs-iac's tests compare what we write
// with what Alertmanager reads.
//
//	amparse            stdin: one JSON string per line (a source_matchers item);
//	                   stdout: one JSON object per line with the matchers that the
//	                   classic (pkg/labels), UTF-8 (matcher/parse) and default fallback
//	                   (matcher/compat) parsers produce, or their errors.
//	amparse -config    stdin: a whole alertmanager.yml; stdout: its inhibit rules as
//	                   loaded by config.Load (-mode fallback|classic|utf8).
//	amparse -yaml      stdin: a YAML sequence of strings; stdout: it as a JSON array,
//	                   decoded by the YAML library Alertmanager's config uses.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/prometheus/alertmanager/config"
	"github.com/prometheus/alertmanager/featurecontrol"
	"github.com/prometheus/alertmanager/matcher/compat"
	"github.com/prometheus/alertmanager/matcher/parse"
	"github.com/prometheus/alertmanager/pkg/labels"
	"go.yaml.in/yaml/v2"
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

func convert(ms labels.Matchers, err error) result {
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

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func lines() error {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := json.NewEncoder(os.Stdout)
	fallback := compat.FallbackMatchersParser(quiet())
	for in.Scan() {
		var text string
		if err := json.Unmarshal(in.Bytes(), &text); err != nil {
			return fmt.Errorf("stdin line is not a JSON string: %w", err)
		}
		classic, cerr := labels.ParseMatchers(text)
		utf8, uerr := parse.Matchers(text)
		fb, ferr := fallback(text, "amparse")
		err := out.Encode(map[string]any{
			"input":    text,
			"classic":  convert(classic, cerr),
			"utf8":     convert(utf8, uerr),
			"fallback": convert(fb, ferr),
		})
		if err != nil {
			return err
		}
	}
	return in.Err()
}

func loadConfig(mode string) error {
	flags := map[string]string{"fallback": "", "classic": featurecontrol.FeatureClassicMode, "utf8": featurecontrol.FeatureUTF8StrictMode}
	feature, ok := flags[mode]
	if !ok {
		return fmt.Errorf("unknown -mode %q", mode)
	}
	ff, err := featurecontrol.NewFlags(quiet(), feature)
	if err != nil {
		return err
	}
	compat.InitFromFlags(quiet(), ff)
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
			"source_matchers": convert(labels.Matchers(r.SourceMatchers), nil).Matchers,
			"target_matchers": convert(labels.Matchers(r.TargetMatchers), nil).Matchers,
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
	mode := flag.String("mode", "fallback", "matcher parser for -config: fallback, classic or utf8")
	asYAML := flag.Bool("yaml", false, "decode a YAML sequence of strings from stdin")
	flag.Parse()
	var err error
	switch {
	case *cfg:
		err = loadConfig(*mode)
	case *asYAML:
		err = yamlStrings()
	default:
		err = lines()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "amparse:", err)
		os.Exit(1)
	}
}
