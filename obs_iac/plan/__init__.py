"""The plan (frozen IR) and its compiler."""

from obs_iac.plan.model import Plan

__all__ = ["Plan"]
