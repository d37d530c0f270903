"""Deterministic serialisation, the owned-file writer, and drift checks."""
