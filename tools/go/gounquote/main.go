// Command gounquote shows what Go makes of string literals and template text, with the
// standard library functions that Prometheus, Loki and Alloy read them with, so
// obs-iac's escaping tests compare what we write with what those programs read.
//
//	gounquote            stdin: one JSON string per line, a quoted literal as written in
//	                     PromQL, LogQL or Alloy; stdout: {"value": ...} or {"error": ...}
//	                     per line, from strconv.Unquote (PromQL: promql/parser
//	                     unquoteString; LogQL: prometheus util/strutil.Unquote, the same
//	                     for double-quoted and backtick strings).
//	gounquote -template  stdin: one JSON string per line, Go template source; stdout:
//	                     what text/template renders it as with no data (literal text
//	                     and string constants only), or the parse error.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/template"
)

type result struct {
	Value *string `json:"value"`
	Error *string `json:"error"`
}

func of(value string, err error) result {
	if err != nil {
		text := err.Error()
		return result{Error: &text}
	}
	return result{Value: &value}
}

func render(source string) (string, error) {
	tmpl, err := template.New("t").Option("missingkey=zero").Parse(source)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	if err := tmpl.Execute(&out, nil); err != nil {
		return "", err
	}
	return out.String(), nil
}

func main() {
	asTemplate := flag.Bool("template", false, "render Go template text instead of unquoting")
	flag.Parse()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var text string
		if err := json.Unmarshal(in.Bytes(), &text); err != nil {
			fmt.Fprintln(os.Stderr, "gounquote: stdin line is not a JSON string:", err)
			os.Exit(1)
		}
		var r result
		if *asTemplate {
			r = of(render(text))
		} else {
			r = of(strconv.Unquote(text))
		}
		if err := out.Encode(r); err != nil {
			fmt.Fprintln(os.Stderr, "gounquote:", err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "gounquote:", err)
		os.Exit(1)
	}
}
