"""Reference data shipped with obs-iac: the DCGM field catalogue and compatibility data."""
