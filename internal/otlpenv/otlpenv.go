// Package otlpenv reads what the OpenTelemetry specification's variables
// say about one signal's OTLP/HTTP export (traces, metrics): whether it
// is on, where it goes, and the resource that sends it. Package tracing
// and package otlpmetrics read them the same way through it.
package otlpenv

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/weeklydigest/digest/internal/redact"
)

// The variables every signal shares.
const (
	envEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envDisabled = "OTEL_SDK_DISABLED"
)

// Enabled reports whether the variables ask for the signal ("traces",
// "metrics"): an OTLP endpoint is set (OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT,
// or OTEL_EXPORTER_OTLP_ENDPOINT), OTEL_SDK_DISABLED is not "true" and
// OTEL_<SIGNAL>_EXPORTER is not "none". The Go SDK does not read
// OTEL_SDK_DISABLED itself; the specification's meaning is honoured here.
func Enabled(getenv func(string) string, signal string) bool {
	s := strings.ToUpper(signal)
	return (getenv("OTEL_EXPORTER_OTLP_"+s+"_ENDPOINT") != "" || getenv(envEndpoint) != "") &&
		!strings.EqualFold(strings.TrimSpace(getenv(envDisabled)), "true") &&
		!strings.EqualFold(strings.TrimSpace(getenv("OTEL_"+s+"_EXPORTER")), "none")
}

// URL is where the signal goes: OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT as it
// is, or OTEL_EXPORTER_OTLP_ENDPOINT with the signal's path, /v1/<signal>,
// appended (the specification's rule for the base endpoint). What is not
// an http:// or https:// URL is refused, its password hidden.
func URL(getenv func(string) string, signal string) (string, error) {
	name := "OTEL_EXPORTER_OTLP_" + strings.ToUpper(signal) + "_ENDPOINT"
	v := getenv(name)
	if v == "" {
		name, v = envEndpoint, strings.TrimRight(getenv(envEndpoint), "/")+"/v1/"+signal
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s %q: want an http:// or https:// URL", name, Redact(v))
	}
	return v, nil
}

// Redact hides a URL's password and secret query parameters: an
// endpoint may carry credentials (redact.URL).
func Redact(s string) string { return redact.URL(s) }

// Resource is the process's resource: service.name "digest" and
// service.version version, unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES say otherwise, and the SDK's own attributes.
func Resource(ctx context.Context, version string) (*resource.Resource, error) {
	// Later options win: the variables override the defaults.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "digest"), attribute.String("service.version", version)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return res, nil
}
