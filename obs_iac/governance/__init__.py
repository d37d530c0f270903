"""Governance: conformance checks (`obs-iac check`), the compatibility matrix and the
maturity scorecard (`obs-iac score`), all read from the plan and the rendered artifacts."""
