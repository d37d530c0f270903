"""`obs-iac test --live`: the generated configuration, unchanged, run by the real Prometheus
and Alertmanager on 127.0.0.1 against exporter-exact fake targets, with fault scenarios
played on disjoint nodes and services and every alert and inhibit edge checked against
what the programs really did. See docs/testing.md."""
