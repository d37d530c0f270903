//go:build tools

// The wrapper module that pins Alertmanager for `make tools` (tools/versions.toml);
// tools/build.py builds the two commands it imports.
package tools

import (
	_ "github.com/prometheus/alertmanager/cmd/alertmanager"
	_ "github.com/prometheus/alertmanager/cmd/amtool"
)
