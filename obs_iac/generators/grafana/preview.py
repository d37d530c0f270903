"""Layout previews for review: a dashboard's JSON drawn as an SVG to scale (rows, panel
boxes with title, unit and the query in short), and an optional PNG through headless
Chromium. Reads the generated JSON, so the picture shows what Grafana would get.

Deterministic: no clock, no fonts measured; every panel box gets its own fill colour from
a fixed palette (the headless-Chromium test counts them).
"""

from __future__ import annotations

import colorsys
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

COLUMN_PX = 40
UNIT_PX = 30
MARGIN = 16
HEADER = 58
GAP = 4
ROW_FILL = "#d0d4da"
BACKGROUND = "#ffffff"
CHAR_PX = 6.6  # average width of an 11px sans-serif glyph, for cutting text to fit


def panel_colour(index: int) -> str:
    """Distinct, light, deterministic fills: hues spread by the golden ratio."""
    hue = (index * 0.618033988749895) % 1.0
    lightness = 0.78 if index % 2 == 0 else 0.70
    red, green, blue = colorsys.hls_to_rgb(hue, lightness, 0.65)
    return f"#{round(red * 255):02x}{round(green * 255):02x}{round(blue * 255):02x}"


# Titles are bold 13 px sans: wider per character than the 10-11 px monospace text
# CHAR_PX is measured for, so they get fewer characters per pixel.
TITLE_SCALE = 0.8


def query_in_short(expr: str) -> str:
    """The query with selector bodies folded, so the metric and functions stay readable."""
    return re.sub(r"\{[^{}]*\}", "{…}", " ".join(expr.split()))


def _short(text: str, width_px: float) -> str:
    limit = max(4, int(width_px / CHAR_PX))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_names(panel: dict[str, Any]) -> str:
    """'columns: SLA, Objective (percentunit)' for a table, 'legend: ...' otherwise."""
    if panel.get("type") == "table":
        units = {
            str((o.get("matcher") or {}).get("options")): next(
                (p.get("value") for p in o.get("properties") or [] if p.get("id") == "unit"), None
            )
            for o in (panel.get("fieldConfig") or {}).get("overrides") or []
        }
        for step in panel.get("transformations") or []:
            if step.get("id") != "organize":
                continue
            options = step.get("options") or {}
            order = options.get("indexByName") or {}
            rename = options.get("renameByName") or {}
            names = [rename.get(k, k) for k in sorted(order, key=lambda k: order[k])]
            return "columns: " + ", ".join(
                f"{n} ({units[n]})" if units.get(n) else n for n in names
            )
        return ""
    legends = [str(t.get("legendFormat")) for t in panel.get("targets") or []]
    legends = [x for x in legends if x and x != "None"]
    return "legend: " + " · ".join(legends[:4]) if legends else ""


def panels_in_order(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from board.get("panels") or []


def size(board: dict[str, Any]) -> tuple[int, int]:
    bottom = 0
    for panel in panels_in_order(board):
        grid = panel.get("gridPos") or {}
        bottom = max(bottom, int(grid.get("y", 0)) + int(grid.get("h", 0)))
    return 24 * COLUMN_PX + 2 * MARGIN, HEADER + bottom * UNIT_PX + 2 * MARGIN


def render_svg(board: dict[str, Any]) -> str:
    width, height = size(board)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Arial, sans-serif">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="{BACKGROUND}"/>',
        f'<text x="{MARGIN}" y="{MARGIN + 18}" font-size="18" font-weight="bold">'
        f"{escape(_short(str(board.get('title', '')), width - 2 * MARGIN))}</text>",
        f'<text x="{MARGIN}" y="{MARGIN + 36}" font-size="11" fill="#555">'
        f"uid {escape(str(board.get('uid', '')))} · variables: "
        + escape(
            ", ".join(
                "$" + str(v.get("name")) for v in (board.get("templating") or {}).get("list") or []
            )
        )
        + "</text>",
    ]
    links = [str(link.get("title", "")) for link in board.get("links") or []]
    if links:
        out.append(
            f'<text x="{MARGIN}" y="{MARGIN + 50}" font-size="11" fill="#555">'
            f"{escape(_short('links: ' + ' | '.join(links), width - 2 * MARGIN))}</text>"
        )
    index = 0
    for panel in panels_in_order(board):
        grid = panel.get("gridPos") or {}
        x = MARGIN + int(grid.get("x", 0)) * COLUMN_PX
        y = MARGIN + HEADER + int(grid.get("y", 0)) * UNIT_PX
        w = int(grid.get("w", 1)) * COLUMN_PX
        h = int(grid.get("h", 1)) * UNIT_PX
        title = str(panel.get("title", ""))
        if panel.get("type") == "row":
            out.append(
                f'<rect x="{x}" y="{y + 2}" width="{w}" height="{h - 4}" fill="{ROW_FILL}"/>'
                f'<text x="{x + 8}" y="{y + 20}" font-size="14" font-weight="bold">'
                f"{escape(_short(title, w - 16))}</text>"
            )
            continue
        fill = panel_colour(index)
        index += 1
        unit = ((panel.get("fieldConfig") or {}).get("defaults") or {}).get("unit", "")
        queries = [str(t.get("expr", "")) for t in panel.get("targets") or []]
        inner = w - 2 * GAP - 16
        lines = [
            (f"{panel.get('type', '')} · unit {unit}", "11", "#222"),
            *[(_short(query_in_short(q), inner), "10", "#333") for q in queries[:3]],
        ]
        # What a reviewer checks: the names a reader sees (legends, table columns).
        described = describe_names(panel)
        if described:
            lines.append((_short(described, inner), "10", "#004"))
        out.append(
            f'<g data-panel-id="{escape(str(panel.get("id", "")))}">'
            f'<rect x="{x + GAP}" y="{y + GAP}" width="{w - 2 * GAP}" height="{h - 2 * GAP}" '
            f'rx="3" fill="{fill}"/>'
            f'<text x="{x + GAP + 8}" y="{y + GAP + 18}" font-size="13" font-weight="bold">'
            f"{escape(_short(title, inner * TITLE_SCALE))}</text>"
        )
        for n, (text, font, colour) in enumerate(lines):
            baseline = y + GAP + 36 + n * 15
            if baseline > y + h - GAP - 4:
                break
            out.append(
                f'<text x="{x + GAP + 8}" y="{baseline}" font-size="{font}" fill="{colour}" '
                f'font-family="DejaVu Sans Mono, monospace">{escape(text)}</text>'
            )
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def svg_to_png(svg: Path, png: Path, width: int, height: int, browser: str | None = None) -> None:
    """Screenshots the SVG in headless Chromium at its own size."""
    exe = browser or chromium()
    if exe is None:
        raise FileNotFoundError("chromium is not installed (Debian: apt-get install chromium)")
    cmd = [
        exe,
        "--headless",
        "--no-sandbox",  # CI runs as root, where Chromium refuses its sandbox
        "--disable-gpu",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        "--default-background-color=ffffffff",
        f"--window-size={width},{height}",
        f"--screenshot={png.resolve()}",
        svg.resolve().as_uri(),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0 or not png.exists():
        raise RuntimeError(f"chromium failed ({result.returncode}): {result.stderr[-2000:]}")
