"""Discover blueprint files and run each in isolation, collecting its registrations."""

from obs_iac.load.loader import LoadedBlueprints, discover_files, load_blueprints, no_services

__all__ = ["LoadedBlueprints", "discover_files", "load_blueprints", "no_services"]
