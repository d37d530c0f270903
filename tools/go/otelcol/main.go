// Program otelcol is the OpenTelemetry Collector obs-iac tests its generated collector
// configuration with: the OTLP receiver, the spanmetrics connector, the batch and
// memory_limiter processors and the Prometheus, OTLP/HTTP and debug exporters.
// Written as the collector's builder v0.165.0 would write it
// (internal/builder/templates/main.go.tmpl and main_others.go.tmpl), with its default
// env and file config providers.
package main

import (
	"os"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/otelcol"
)

// version is the collector release every component module belongs to. tools/build.py
// sets it from tools/versions.toml (-ldflags -X main.version=...), and obs_iac.toolchain
// reads it back from `otelcol --version`.
var version = "unknown"

func main() {
	info := component.BuildInfo{
		Command:     "otelcol",
		Description: "OpenTelemetry Collector built for obs-iac's tests",
		Version:     version,
	}

	set := otelcol.CollectorSettings{
		BuildInfo: info,
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{
					envprovider.NewFactory(),
					fileprovider.NewFactory(),
				},
			},
		},
		ProviderModules: map[string]string{
			envprovider.NewFactory().Create(confmap.ProviderSettings{}).Scheme():  "go.opentelemetry.io/collector/confmap/provider/envprovider v1.71.0",
			fileprovider.NewFactory().Create(confmap.ProviderSettings{}).Scheme(): "go.opentelemetry.io/collector/confmap/provider/fileprovider v1.71.0",
		},
		ConverterModules: []string{},
	}

	if err := otelcol.NewCommand(set).Execute(); err != nil {
		// cobra has already printed the error.
		os.Exit(1)
	}
}
