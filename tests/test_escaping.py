"""Escaping by construction (issue 23): for every output language, arbitrary strings go
through obs-iac's escaper and into the program that reads that language, which must both
load the result and read back exactly the input.

Readers: Alertmanager's own matcher parsers at v0.35.0 and v0.25.0 (tools/go/amparse,
tools/go/amparse025) and Debian's amtool 0.25; Go's strconv.Unquote and text/template
(tools/go/gounquote: what Prometheus, Loki and Alloy unquote strings and expand
templates with); promql-parser and promtool 2.42; PyYAML and Go's yaml.v2 (Alertmanager's
YAML library); json; RE2. Each language is one batched subprocess call per example list,
so the whole file runs in seconds.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import re2
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obs_iac import pipeline
from obs_iac.escaping import (
    Template,
    go_string,
    logql_string,
    regex_literal,
    template_literal,
    template_text,
)
from obs_iac.generators.alloy import alloy_string, quoted
from obs_iac.packs.inhibit.matchers import parse_matcher, render
from obs_iac.plan.model import Matcher
from obs_iac.render.fastyaml import dump_simple
from obs_iac.render.jsontext import dumps_indented
from obs_iac.render.serialize import dump_yaml
from obs_iac.render.writer import write
from tests.conftest import PYPROJECT, RunCli, blueprint_source, make_repo
from tests.tools import require_built_tool, require_tool

# Lone surrogates cannot be written as UTF-8 at all, so no output file can hold them.
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=24)
# Characters that have a meaning in at least one of the languages, to hit them often.
NASTY = st.text(st.sampled_from("\\\"'`{}$|.*+?()[]^,=~!\n\r\t\x00\x7f\u2028 #:-%ü😀"), max_size=12)
BATCHES = st.lists(st.one_of(TEXT, NASTY), min_size=1, max_size=60)
FEW = settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TRICKY = [
    "",
    "gpu-node-\\d+",
    "gpu-(a|b)\\d",
    "a\\tb",
    "a\tb",
    'say "hi"',
    "back\\",
    "\\",
    "\\\\",
    "\\n",
    "line\nbreak",
    "cr\rlf",
    "\x00nul",
    "{{",
    "{{.Labels}}",
    "x{",
    "{",
    "}}",
    "{{ end }}",
    "a,b",
    "{a}",
    "ü😀",
    "\u2028",
    " lead and trail ",
    "yes",
    "null",
    "# not a comment",
    "- item",
    "key: value",
]


def _lines(tool: str, texts: Sequence[str], *args: str) -> list[dict[str, Any]]:
    stdin = "".join(json.dumps(t) + "\n" for t in texts)
    proc = subprocess.run(
        [tool, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    # split("\n"), not splitlines(): a value may hold U+0085 or U+2028 as itself.
    out = [json.loads(line) for line in proc.stdout.split("\n") if line]
    assert len(out) == len(texts)
    return out


# --- Alertmanager matchers ------------------------------------------------------------------


def _matchers(values: Sequence[str], utf8_names: bool) -> list[Matcher]:
    out = []
    for value in values:
        # Arbitrary text as exact values; as a regex, the RE2 literal of the text (an
        # arbitrary string is rarely a valid regex, and Alertmanager rejects invalid ones).
        out += [Matcher(name="host_name", op=op, value=value) for op in ("=", "!=")]
        out += [Matcher(name="host_name", op=op, value=regex_literal(value)) for op in ("=~", "!~")]
        if utf8_names:
            out.append(Matcher(name=f"resource.gpu.{value}", op="=", value=value))
    return out


def _assert_alertmanager_reads(tool: str, matchers: Sequence[Matcher], modes: tuple[str, ...]):
    results = _lines(tool, [render(m) for m in matchers])
    for matcher, result in zip(matchers, results, strict=True):
        want = [{"name": matcher.name, "type": matcher.op, "value": matcher.value}]
        for mode in modes:
            assert result[mode] == {"matchers": want, "error": None}, (mode, result)
        # Our own reading of what we wrote is Alertmanager's reading too.
        assert parse_matcher(render(matcher)) == matcher


@FEW
@given(BATCHES)
def test_matchers_mean_the_same_to_alertmanager_0_35(values: list[str]) -> None:
    tool = require_built_tool("amparse")
    matchers = _matchers([*TRICKY, *values], utf8_names=False)
    # Every parser mode of 0.35 (classic-mode, utf8-strict-mode, the default fallback)
    # reads the same matcher: there is nothing for fallback to disagree about.
    _assert_alertmanager_reads(tool, matchers, ("classic", "utf8", "fallback"))
    # UTF-8 label names exist only for the UTF-8 parser (and fallback, which uses it).
    utf8 = [m for m in _matchers([*TRICKY, *values], utf8_names=True) if "." in m.name]
    _assert_alertmanager_reads(tool, utf8, ("utf8", "fallback"))


@FEW
@given(BATCHES)
def test_matchers_mean_the_same_to_alertmanager_0_25(values: list[str]) -> None:
    tool = require_built_tool("amparse025")
    _assert_alertmanager_reads(tool, _matchers([*TRICKY, *values], False), ("classic",))


# What users write, as Alertmanager reads it: the issue's three cases and their kin.
USER_MATCHERS = [
    'host_name=~"gpu-node-\\d+"',
    'host_name!~"gpu-(a|b)\\d"',
    'host_name="a\\tb"',
    'host_name="a\\\\tb"',
    'host_name="say \\"hi\\""',
    'host_name="two\\nlines"',
    'host_name=~"\\w+\\.example\\.com"',
    'host_name="trailing\\\\"',
    "host_name=bare-value",
    'host_name = "spaced"',
]


def test_the_issue_cases_keep_their_meaning() -> None:
    # Before: \d became d, \d lost its backslash, \t became a tab.
    assert parse_matcher('host_name=~"gpu-node-\\d+"').value == "gpu-node-\\d+"
    assert parse_matcher('host_name!~"gpu-(a|b)\\d"').value == "gpu-(a|b)\\d"
    assert parse_matcher('host_name="a\\tb"').value == "a\\tb"
    assert render(parse_matcher('host_name=~"gpu-node-\\d+"')) == 'host_name=~"gpu-node-\\\\d+"'


@pytest.mark.parametrize("tool", ["amparse", "amparse025"])
def test_what_a_user_writes_is_what_alertmanager_matches(tool: str) -> None:
    path = require_built_tool(tool)
    theirs = _lines(path, USER_MATCHERS)
    ours = _lines(path, [render(parse_matcher(text)) for text in USER_MATCHERS])
    for text, a, b in zip(USER_MATCHERS, theirs, ours, strict=True):
        assert a["fallback"]["error"] is None, (text, a)
        assert b["fallback"] == a["fallback"], text  # the default mode of every release
        (one,) = a["fallback"]["matchers"]
        assert parse_matcher(text) == Matcher(name=one["name"], op=one["type"], value=one["value"])


def test_a_bare_value_alertmanager_would_split_is_an_error() -> None:
    # pkg/labels.ParseMatchers splits on "," outside quotes: two matchers, not one value.
    for text in ("host_name=a,b", "host_name=x}", 'host_name=a\\"b'):
        with pytest.raises(ValueError):
            parse_matcher(text)


def _config(matchers: Sequence[Matcher]) -> str:
    rules = [{"source_matchers": [render(m)], "target_matchers": [render(m)]} for m in matchers]
    doc = {
        "route": {"receiver": "null"},
        "receivers": [{"name": "null"}],
        "inhibit_rules": rules,
    }
    return dump_simple(doc)  # the writer every generated file goes through


@FEW
@given(BATCHES)
def test_whole_configs_load_and_keep_every_value(tmp_path_factory: Any, values: list[str]) -> None:
    matchers = _matchers([*TRICKY, *values], utf8_names=False)
    text = _config(matchers)
    path = Path(tmp_path_factory.mktemp("am")) / "alertmanager.yml"
    path.write_text(text, encoding="utf-8")
    amtool = require_tool("amtool")
    proc = subprocess.run(
        [amtool, "check-config", str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for tool in ("amparse", "amparse025"):
        loaded = subprocess.run(
            [require_built_tool(tool), "-config"],
            input=text,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert loaded.returncode == 0, loaded.stderr
        rules = json.loads(loaded.stdout)["inhibit_rules"]
        got = [(m["name"], m["type"], m["value"]) for r in rules for m in r["source_matchers"]]
        assert got == [(m.name, m.op, m.value) for m in matchers]


# --- PromQL, LogQL and Alloy strings --------------------------------------------------------


@FEW
@given(BATCHES)
def test_go_strings_mean_the_same_to_go(values: list[str]) -> None:
    """PromQL and LogQL string literals are Go strings (strconv.Unquote); Alloy's double-
    quoted and backtick strings use Go's escapes and raw strings (grafana/alloy
    syntax/scanner/scanner.go @3ad0d81, scanEscape)."""
    tool = require_built_tool("gounquote")
    texts = [*TRICKY, *values]
    literals = {
        "promql": [go_string(v) for v in texts],
        "logql": [logql_string(v) for v in texts],
        "alloy": [alloy_string(v) for v in texts],
        "alloy-quoted": [quoted(v) for v in texts],
    }
    for language, lits in literals.items():
        for value, result in zip(texts, _lines(tool, lits), strict=True):
            assert result == {"value": value, "error": None}, (language, value, result)


@FEW
@given(BATCHES)
def test_promql_strings_mean_the_same_to_promql_parser(values: list[str]) -> None:
    for value in [*TRICKY, *values]:
        node = promql_parser.parse("m{a=" + go_string(value) + "}")
        assert [(m.name, m.value) for m in node.matchers.matchers] == [("a", value)]


@FEW
@given(BATCHES)
def test_promql_strings_load_in_promtool(tmp_path_factory: Any, values: list[str]) -> None:
    rules = [
        {"record": f"escaped:r{i}", "expr": f"m{{a={go_string(v)}}} or vector(1)"}
        for i, v in enumerate([*TRICKY, *values])
    ]
    path = Path(tmp_path_factory.mktemp("pq")) / "r.yml"
    path.write_text(dump_simple({"groups": [{"name": "g", "rules": rules}]}), encoding="utf-8")
    proc = subprocess.run(
        [require_tool("promtool"), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@FEW
@given(BATCHES)
def test_regex_literals_match_exactly_their_text(values: list[str]) -> None:
    for value in [*TRICKY, *values]:
        pattern = regex_literal(value)
        assert re2.fullmatch(pattern, value) is not None, (value, pattern)
        assert re2.fullmatch(pattern, value + "x") is None


# --- Go templates (alert annotations) -------------------------------------------------------


@FEW
@given(BATCHES)
def test_template_literals_render_as_themselves(values: list[str]) -> None:
    tool = require_built_tool("gounquote")
    texts = [*TRICKY, *values]
    # Alone, and in front of an action: a trailing "{" must not fuse with it into "{{{".
    sources = [template_literal(v) for v in texts] + [
        template_literal(v) + '{{ "z" }}' for v in texts
    ]
    expected = texts + [v + "z" for v in texts]
    for want, result in zip(expected, _lines(tool, sources, "-template"), strict=True):
        assert result == {"value": want, "error": None}


@FEW
@given(BATCHES)
def test_annotations_load_and_expand_literally_in_promtool(
    tmp_path_factory: Any, values: list[str]
) -> None:
    """promtool test rules expands every annotation as Prometheus does and compares it with
    the plain text expected: the strongest check there is for "still means the same"."""
    texts = [v for v in [*TRICKY, *values] if v]  # Prometheus drops empty annotations
    annotations = {f"a{i}": template_literal(v) for i, v in enumerate(texts)}
    expected = {f"a{i}": v for i, v in enumerate(texts)}
    folder = Path(tmp_path_factory.mktemp("tmpl"))
    rules = {"groups": [{"name": "g", "rules": [{"alert": "Esc", "expr": "vector(1)"}]}]}
    rules["groups"][0]["rules"][0]["annotations"] = annotations
    (folder / "r.yml").write_text(dump_simple(rules), encoding="utf-8")
    test = {
        "rule_files": ["r.yml"],
        "tests": [
            {
                "interval": "1m",
                "input_series": [],
                "alert_rule_test": [
                    {
                        "eval_time": "1m",
                        "alertname": "Esc",
                        "exp_alerts": [{"exp_labels": {}, "exp_annotations": expected}],
                    }
                ],
            }
        ],
    }
    (folder / "t.yml").write_text(dump_simple(test), encoding="utf-8")
    promtool = require_tool("promtool")
    for args in (["check", "rules", "r.yml"], ["test", "rules", "t.yml"]):
        proc = subprocess.run(
            [promtool, *args], cwd=folder, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, (args, proc.stdout + proc.stderr)


def test_user_text_is_literal_and_a_template_is_not() -> None:
    assert template_text("https://x/{{.Labels}}") == 'https://x/{{ "{{" }}.Labels}}'
    assert template_text(Template("https://x/{{ $labels.team }}")) == (
        "https://x/{{ $labels.team }}"
    )
    with pytest.raises(ValueError, match="unclosed action"):
        Template("https://x/{{")
    with pytest.raises(ValueError, match="not defined"):
        Template("https://x/{{ nosuchfunc }}")


# --- YAML and JSON --------------------------------------------------------------------------


@FEW
@given(BATCHES)
def test_yaml_loads_back_the_same_strings(values: list[str]) -> None:
    texts = [*TRICKY, *values]
    docs = [texts, {f"k{i}": v for i, v in enumerate(texts)}, {v: "key" for v in texts}]
    for doc in docs:
        for text in (dump_simple(doc), dump_yaml(doc)):
            assert yaml.safe_load(text) == doc
    # Go's yaml.v2, as Alertmanager 0.35 (go.yaml.in/yaml/v2) and 0.25 (gopkg.in/yaml.v2)
    # decode their config.
    for tool in ("amparse", "amparse025"):
        proc = subprocess.run(
            [require_built_tool(tool), "-yaml"],
            input=dump_simple(texts),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == texts


@FEW
@given(BATCHES)
def test_json_loads_back_the_same_strings(values: list[str]) -> None:
    texts = [*TRICKY, *values]
    doc = {"list": texts, "map": {v: v for v in texts}}
    assert json.loads(dumps_indented(doc)) == doc


# --- Whole renders with hostile blueprint text ----------------------------------------------

HOSTILE_MATCHERS = ['host_name=~"gpu-node-\\\\d+"', 'host_name!~"gpu-(a|b)\\\\d"']


def _hostile_repo(root: Path, runbook: str, objective: str) -> Path:
    """The example blueprints with a hostile runbook URL and objective on both services,
    and the issue's matchers on an inhibit edge of image-classify-v3."""
    repo = make_repo(root)
    for path in (repo / "blueprints").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        text = re.sub(r'runbook_base_url="[^"]*"', f"runbook_base_url={runbook}", text)
        text = re.sub(r'(\n    )objective="[^"]*"', rf"\1objective={objective}", text, count=1)
        edge = 'target_alerts=("GpuUtilizationLow",),'
        text = text.replace(
            edge, f"{edge}\n                source_matchers={tuple(HOSTILE_MATCHERS)!r},"
        )
        path.write_text(text, encoding="utf-8")
    # The edge lives in one example; a blueprint change that moves it must fail here,
    # not make the matcher test vacuous.
    assert any(
        "source_matchers=" in p.read_text(encoding="utf-8")
        for p in (repo / "blueprints").glob("*.py")
    )
    return repo


def _render(repo: Path) -> Path:
    ws = pipeline.open_workspace(repo)
    result = pipeline.render(ws)
    write(ws.output, result.files)
    return ws.output


def _promtool(out: Path, test_files: Sequence[str]) -> None:
    """``promtool check rules`` on every rule file, ``promtool test rules`` on the named
    test files (the SLO slice tests take minutes on a loaded machine; their annotations
    are built by the same functions and checked by check rules and gounquote)."""
    promtool = require_tool("promtool")
    rules = sorted(str(p) for p in (out / "prometheus/rules").glob("*.yml"))
    tests = [str(out / "prometheus/tests" / name) for name in test_files]
    assert rules
    for args in (["check", "rules", *rules], ["test", "rules", *tests] if tests else []):
        if not args:
            continue
        proc = subprocess.run([promtool, *args], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _annotations(out: Path, key: str) -> list[str]:
    found = []
    for path in sorted((out / "prometheus/rules").glob("*.yml")):
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]:
            found += [r["annotations"][key] for r in group["rules"] if "alert" in r]
    return found


HOSTILE_RUNBOOK = '"https://runbooks.example.com/{{.Labels}}/x{{"'
HOSTILE_OBJECTIVE = "Fresh within {{ 15 minutes; see {{.Labels}} {{ end }} {"


def _small_repo(tmp: Path, runbook: str, objective: str) -> Path:
    """One service with the GPU, framework and inhibit packs and no SLO."""
    root = tmp / "repo"
    (root / "blueprints").mkdir(parents=True)
    source = blueprint_source(runbook_base_url=runbook, objective=objective).replace(
        "from obs_iac import GpuFleet, service", "from obs_iac import GpuFleet, Template, service"
    )
    framework = '{"world_size": 8, "ranks_per_node": 8, "step_time_budget_seconds": 1.5}'
    source = source.replace("\n)\n", f"\n    framework={framework},\n)\n")
    (root / "blueprints" / "svc_a.py").write_text(source, encoding="utf-8")
    (root / "pyproject.toml").write_text(PYPROJECT.format(extra=""), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "repo"
    return _render(_hostile_repo(root, HOSTILE_RUNBOOK, json.dumps(HOSTILE_OBJECTIVE)))


def test_runbook_url_and_objective_with_braces_stay_text(hostile: Path) -> None:
    # Before: every alert outside the GPU pack carried a live {{.Labels}} action and an
    # unclosed "{{", so promtool rejected every rule file while render exited 0.
    _promtool(hostile, [])
    urls = _annotations(hostile, "runbook_url")
    objectives = _annotations(hostile, "sla_objective")
    assert len(urls) > 20 and len(objectives) == len(urls)
    tool = require_built_tool("gounquote")
    for url, result in zip(urls, _lines(tool, urls, "-template"), strict=True):
        assert result["error"] is None, (url, result)
        assert result["value"].startswith("https://runbooks.example.com/{{.Labels}}/x{{/"), url
    for result in _lines(tool, objectives, "-template"):
        assert result["value"] == HOSTILE_OBJECTIVE


def test_the_generated_tests_expect_the_literal_text(tmp_path: Path) -> None:
    # One small service, so promtool test rules runs in seconds: its generated tests
    # compare every annotation, as Prometheus expands it, with the literal text.
    repo = _small_repo(tmp_path, runbook=HOSTILE_RUNBOOK, objective=json.dumps(HOSTILE_OBJECTIVE))
    out = _render(repo)
    _promtool(out, ["svc-a.test.yml"])
    assert _annotations(out, "sla_objective")[0] == template_literal(HOSTILE_OBJECTIVE)


def test_inhibit_matchers_reach_alertmanager_as_written(hostile: Path) -> None:
    text = (hostile / "alertmanager/inhibit_rules.yml").read_text(encoding="utf-8")
    doc = {"route": {"receiver": "null"}, "receivers": [{"name": "null"}], **yaml.safe_load(text)}
    config = dump_simple(doc)
    path = hostile.parent / "alertmanager.yml"
    path.write_text(config, encoding="utf-8")
    proc = subprocess.run(
        [require_tool("amtool"), "check-config", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for tool in ("amparse", "amparse025"):
        loaded = subprocess.run(
            [require_built_tool(tool), "-config"], input=config, capture_output=True, text=True
        )
        assert loaded.returncode == 0, loaded.stderr
        values = {
            (m["type"], m["value"])
            for rule in json.loads(loaded.stdout)["inhibit_rules"]
            for m in rule["source_matchers"]
            if m["name"] == "host_name"
        }
        # Besides presence guards (host_name=~".+") where the edge compares host_name.
        assert values - {("=~", ".+")} == {("=~", "gpu-node-\\d+"), ("!~", "gpu-(a|b)\\d")}


def test_a_template_the_user_marks_is_live(tmp_path: Path) -> None:
    live = "https://runbooks.example.com/{{ $labels.host_name }}"
    out = _render(_small_repo(tmp_path, runbook=f"Template({live!r})", objective='"Fresh"'))
    _promtool(out, ["svc-a.test.yml"])  # the tests expect each alert's own host name
    urls = _annotations(out, "runbook_url")
    assert urls and all(u.startswith(live + "/") for u in urls)


def test_a_broken_template_is_a_located_error(tmp_path: Path, run_cli: RunCli) -> None:
    broken = 'Template("https://runbooks.example.com/{{")'
    repo = _small_repo(tmp_path, runbook=broken, objective='"Fresh"')
    result = run_cli(["render"], repo)
    assert result.exit_code == 2, result.output
    assert "runbook_base_url" in result.output and "unclosed action" in result.output
    assert "Traceback" not in result.output
    assert not (repo / "generated").exists()


TEMPLATES = [
    "https://x/{{ $labels.team }}",
    "https://x/{{ .Labels.team }}",
    '{{ index $labels "host_name" }}',
    "{{ if $labels.team }}{{ $labels.team }}{{ else }}none{{ end }}",
    "{{ $value | humanize }}",
    "{{/* a comment */}}text",
    "{{- $labels.team -}}",
    "https://x/{{",
    "{{ end }}",
    "{{ nosuchfunc }}",
    "{{ $nosuchvar }}",
    "{{ if $labels.team }}open",
    '{{ "unterminated }}',
]


def test_template_is_checked_like_promtool(tmp_path: Path) -> None:
    """Template() accepts exactly the templates promtool check rules accepts."""
    promtool = require_tool("promtool")
    for source in TEMPLATES:
        try:
            Template(source)
            ours = True
        except ValueError:
            ours = False
        rule = {"alert": "T", "expr": "vector(1)", "annotations": {"a": source}}
        path = tmp_path / "r.yml"
        path.write_text(dump_simple({"groups": [{"name": "g", "rules": [rule]}]}))
        proc = subprocess.run(
            [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
        )
        assert ours == (proc.returncode == 0), (source, proc.stdout + proc.stderr)
