"""Semantic diff of rendered output: changes by meaning and risk flags (``obs-iac diff``)."""
