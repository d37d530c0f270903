"""The exporter-shape catalogue as the live run uses it.

The fake dcgm-exporter serves what the real exporter emits, never what the rule
generator assumes: every series comes from ``obs_iac.catalog.exporter_shapes``, the
catalogue read off NVIDIA/dcgm-exporter at each release tag (file and tag cited there).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from obs_iac.catalog import exporter_shapes
from obs_iac.catalog.exporter_shapes import ExporterShape


def provisional() -> bool:
    """Always False: the shapes come from the catalogue (kept for the report's field)."""
    return False


def gpu_device(**kwargs: Any) -> exporter_shapes.GpuDevice:
    return exporter_shapes.GpuDevice(**kwargs)


def pod_attribution(**kwargs: Any) -> exporter_shapes.PodAttribution:
    return exporter_shapes.PodAttribution(**kwargs)


def shape_for(exporter_version: str, helps: Mapping[str, tuple[str, str]]) -> ExporterShape:
    """The release's shape; ``helps`` (the generated collectors.csv) is not needed: the
    catalogue holds the exporter's own HELP and TYPE lines."""
    del helps
    return exporter_shapes.shape(exporter_version)


def render(shape: ExporterShape, samples: Iterable[tuple[str, Mapping[str, str], float]]) -> str:
    return exporter_shapes.render_exposition(shape, samples)
