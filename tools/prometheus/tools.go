//go:build tools

// The wrapper module that pins Prometheus for `make tools` (tools/versions.toml);
// tools/build.py builds the two commands it imports.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
