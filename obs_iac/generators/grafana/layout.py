"""Pure layout rules shared by the dashboard generator, the dashboards pack, the lint
rules and the previews: uids, stable panel ids, grid packing, override application.

Nothing here depends on grafanalib, so it can be imported anywhere.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from obs_iac.plan.model import DashboardRow, Panel

GRID_COLUMNS = 24
MAX_UID_LENGTH = 40
UID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,40}$")
LAYERS: tuple[str, ...] = ("business", "framework", "hardware", "logs")
ROW_HEIGHT = 1
# Panel ids live in one range, away from the small ids Grafana's UI hands out when a
# user adds a panel, so a hand-made panel in a copied dashboard cannot collide.
ID_RANGE_START = 1_000
ID_RANGE_SIZE = 9_000_000


def slug(text: str) -> str:
    """Lowercase alphanumerics and '-', as the k8s-compatible subset of uid characters."""
    out = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return out or "x"


def stable_uid(*parts: str) -> str:
    """A uid from a stable name: readable when it fits in 40 characters, else cut and
    suffixed with a hash of the whole name so two long names never share a uid."""
    base = slug("-".join(parts))
    if len(base) <= MAX_UID_LENGTH:
        return base
    digest = hashlib.sha256(base.encode()).hexdigest()[:8]
    return f"{base[: MAX_UID_LENGTH - 9].rstrip('-')}-{digest}"


def _hash_id(key: str) -> int:
    digest = hashlib.sha256(key.encode()).digest()
    return ID_RANGE_START + int.from_bytes(digest[:8], "big") % ID_RANGE_SIZE


def assign_ids(keys: Sequence[str]) -> dict[str, int]:
    """Panel id per stable key. Each id depends on its own key only; on the (rare) hash
    collision the lexically later key probes upwards, so existing ids stay put."""
    taken: set[int] = set()
    out: dict[str, int] = {}
    for key in sorted(keys):
        value = _hash_id(key)
        while value in taken:
            value = ID_RANGE_START + (value - ID_RANGE_START + 1) % ID_RANGE_SIZE
        taken.add(value)
        out[key] = value
    return out


def row_key(layer: str, pack: str) -> str:
    return f"row/{layer}/{pack}"


def panel_id_key(layer: str, panel_key: str) -> str:
    return f"{layer}/{panel_key}"


@dataclass(frozen=True)
class GridPos:
    x: int
    y: int
    w: int
    h: int

    def as_dict(self) -> dict[str, int]:
        return {"h": self.h, "w": self.w, "x": self.x, "y": self.y}

    def overlaps(self, other: GridPos) -> bool:
        return (
            self.x < other.x + other.w
            and other.x < self.x + self.w
            and self.y < other.y + other.h
            and other.y < self.y + self.h
        )


@dataclass(frozen=True)
class PlacedPanel:
    layer: str
    panel: Panel
    id: int
    grid: GridPos


@dataclass(frozen=True)
class PlacedRow:
    layer: str
    pack: str
    title: str
    id: int
    grid: GridPos
    panels: tuple[PlacedPanel, ...]


def pack_row(panels: Sequence[Panel], top: int) -> tuple[list[GridPos], int]:
    """Left-to-right packing in the row's own order, wrapping at 24 columns; returns the
    positions and the first free y below the row.

    Every line is then closed up: its spare columns are shared out over its panels in
    proportion to their widths (the leftmost get the rounding), and every panel takes
    the line's height, so a row has no hole on its right or under a short panel. A
    panel's width is therefore its share of a line, and at least what it asked for."""
    lines: list[list[Panel]] = [[]]
    used = 0
    for panel in panels:
        width = min(panel.width, GRID_COLUMNS)
        if lines[-1] and used + width > GRID_COLUMNS:
            lines.append([])
            used = 0
        lines[-1].append(panel)
        used += width
    out: list[GridPos] = []
    y = top
    for line in lines:
        if not line:
            continue
        widths = fill_widths([min(p.width, GRID_COLUMNS) for p in line])
        height = max(p.height for p in line)
        x = 0
        for width in widths:
            out.append(GridPos(x=x, y=y, w=width, h=height))
            x += width
        y += height
    return out, y


def fill_widths(widths: Sequence[int]) -> list[int]:
    """Widths scaled up to fill 24 columns exactly (a full line is left as it is)."""
    total = sum(widths)
    if total >= GRID_COLUMNS or total <= 0:
        return list(widths)
    scaled = [w * GRID_COLUMNS // total for w in widths]
    for i in range(GRID_COLUMNS - sum(scaled)):
        scaled[i % len(scaled)] += 1
    return scaled


def order_rows(rows: Iterable[DashboardRow]) -> list[DashboardRow]:
    """Drill-down order: business, framework, hardware, logs; then by pack and title."""
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    return sorted(rows, key=lambda r: (rank.get(r.layer, len(LAYERS)), r.pack, r.title))


def apply_overrides(
    rows: Sequence[DashboardRow], overrides: Mapping[str, Mapping[str, Any]]
) -> list[DashboardRow]:
    """Width/height/hide per panel key. Unknown keys are the dashboards pack's job to
    report (with a location); here they are simply ignored."""
    out = []
    for row in rows:
        panels = []
        for panel in row.panels:
            change = overrides.get(panel.key) or {}
            if change.get("hide"):
                continue
            update = {k: change[k] for k in ("width", "height") if change.get(k) is not None}
            panels.append(panel.model_copy(update=update) if update else panel)
        if panels:
            out.append(row.model_copy(update={"panels": tuple(panels)}))
    return out


def place(rows: Sequence[DashboardRow]) -> list[PlacedRow]:
    """Rows stacked in drill-down order, each headed by a row panel; ids from stable
    keys, so adding a panel never renumbers another."""
    ordered = order_rows(rows)
    keys = []
    for row in ordered:
        keys.append(row_key(row.layer, row.pack))
        keys.extend(panel_id_key(row.layer, p.key) for p in row.panels)
    ids = assign_ids(sorted(set(keys)))
    y = 0
    placed: list[PlacedRow] = []
    for row in ordered:
        header = GridPos(x=0, y=y, w=GRID_COLUMNS, h=ROW_HEIGHT)
        grids, y = pack_row(row.panels, y + ROW_HEIGHT)
        placed.append(
            PlacedRow(
                layer=row.layer,
                pack=row.pack,
                title=row.title,
                id=ids[row_key(row.layer, row.pack)],
                grid=header,
                panels=tuple(
                    PlacedPanel(row.layer, p, ids[panel_id_key(row.layer, p.key)], g)
                    for p, g in zip(row.panels, grids, strict=True)
                ),
            )
        )
    return placed


def duplicate_keys(rows: Sequence[DashboardRow]) -> dict[str, list[str]]:
    """Panel keys used more than once in one service's dashboard -> the packs using them."""
    seen: dict[str, list[str]] = {}
    for row in rows:
        for panel in row.panels:
            seen.setdefault(panel.key, []).append(row.pack)
    return {k: v for k, v in sorted(seen.items()) if len(v) > 1}
