"""Lint rules: one module per area; each rule has a docs page under docs/lint/."""
