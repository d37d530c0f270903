"""Grafana dashboards. Kept import-light: the generator module (the only importer of
grafanalib) is loaded through its own entry point, so packs and lint rules can use the
pure layout helpers here without pulling grafanalib in."""
