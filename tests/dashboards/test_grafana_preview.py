"""Layout previews: deterministic SVG, and a real headless-Chromium screenshot with one
box per panel."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from obs_iac.cli import main
from obs_iac.generators.grafana.preview import (
    COLUMN_PX,
    GAP,
    UNIT_PX,
    chromium,
    panel_colour,
    render_svg,
    size,
    svg_to_png,
)
from tests.dashboards.conftest import REPO


def require_chromium() -> str:
    exe = chromium()
    if exe is None:
        message = "chromium is not installed (Debian: apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return exe


def require_pillow() -> Any:
    try:
        from PIL import Image
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("Pillow is missing: pip install -e '.[dev]'")
        pytest.skip("Pillow is not installed")
    return Image


def content(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in board["panels"] if p["type"] != "row"]


def test_svg_has_one_distinct_box_per_panel(boards: dict[str, dict]) -> None:
    for board in boards.values():
        svg = render_svg(board)
        assert svg == render_svg(board), "deterministic"
        groups = re.findall(r'<g data-panel-id="(\d+)"><rect [^>]*fill="(#[0-9a-f]{6})"', svg)
        assert [int(pid) for pid, _ in groups] == [p["id"] for p in content(board)]
        assert len({fill for _, fill in groups}) == len(groups)
        for p in content(board):
            assert p["title"][:10] in svg
            assert p["fieldConfig"]["defaults"]["unit"] in svg


def test_cli_writes_svgs(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["--root", str(REPO), "preview", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "obs-iac-fleet-overview.svg",
        "obs-iac-image-classify-v3.svg",
        "obs-iac-recomm-v2.svg",
    ]


def test_chromium_screenshot_shows_every_panel(boards: dict[str, dict], tmp_path: Path) -> None:
    exe = require_chromium()
    image_mod = require_pillow()
    board = boards["obs-iac-recomm-v2"]
    svg, png = tmp_path / "b.svg", tmp_path / "b.png"
    svg.write_text(render_svg(board))
    width, height = size(board)
    svg_to_png(svg, png, width, height, exe)
    with image_mod.open(png) as img:
        rgb = img.convert("RGB")
        assert rgb.size == (width, height)
        counts = {
            "#{:02x}{:02x}{:02x}".format(*colour): n
            for n, colour in rgb.getcolors(maxcolors=width * height) or []
        }
    assert len(counts) > 10, "the screenshot is blank"
    panels = content(board)
    palette = [panel_colour(i) for i in range(len(panels))]
    found = [c for c in palette if counts.get(c, 0) > 0]
    assert len(found) == len(panels), f"expected {len(panels)} panel boxes, saw {len(found)}"
    for colour, panel in zip(palette, panels, strict=True):
        grid = panel["gridPos"]
        area = (grid["w"] * COLUMN_PX - 2 * GAP) * (grid["h"] * UNIT_PX - 2 * GAP)
        # Text covers part of each box; most of it must still be the panel's own fill.
        assert counts[colour] > area * 0.6, (panel["title"], counts[colour], area)
    # And no extra box: no other palette colour is on screen.
    assert counts.get(panel_colour(len(panels)), 0) == 0
