package otlpenv

import (
	"strings"
	"testing"
)

// Each signal is off unless the standard variables ask for it; its own
// endpoint wins over the base one, which gets the signal's path; what is
// not an http(s) URL is refused, its password hidden.
func TestEnabledAndURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		signal  string
		env     map[string]string
		enabled bool
		url     string
	}{
		{"metrics", map[string]string{}, false, ""},
		{"metrics", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318/"}, true, "http://otel:4318/v1/metrics"},
		{"traces", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318"}, true, "http://otel:4318/v1/traces"},
		{"metrics", map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "https://otel/custom"}, true, "https://otel/custom"},
		{"metrics", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://otel/v1/traces"}, false, ""},
		{"metrics", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://b:4318/m"}, true, "http://b:4318/m"},
		{"metrics", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318", "OTEL_SDK_DISABLED": " True "}, false, ""},
		{"metrics", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318", "OTEL_METRICS_EXPORTER": "none"}, false, ""},
		{"traces", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318", "OTEL_METRICS_EXPORTER": "none"}, true, "http://otel:4318/v1/traces"},
		{"metrics", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318", "OTEL_METRICS_EXPORTER": "otlp"}, true, "http://otel:4318/v1/metrics"},
		{"metrics", map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "ftp://user:secret@otel/"}, true, ""},
	} {
		getenv := func(k string) string { return tc.env[k] }
		if got := Enabled(getenv, tc.signal); got != tc.enabled {
			t.Errorf("Enabled(%v, %s) = %v; want %v", tc.env, tc.signal, got, tc.enabled)
		}
		if !tc.enabled {
			continue
		}
		got, err := URL(getenv, tc.signal)
		if got != tc.url || (err != nil) != (tc.url == "") {
			t.Errorf("URL(%v, %s) = %q, %v; want %q", tc.env, tc.signal, got, err, tc.url)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}
