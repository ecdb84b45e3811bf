package harness

import (
	"fmt"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/raygo-dev/raygo/internal/rpcutil"
)

// Scrape reads a /metrics endpoint (the head's dashboard port, a raylet's metrics
// export port) with Prometheus' own text parser.
func Scrape(t testing.TB, address string) (map[string]*dto.MetricFamily, error) {
	t.Helper()
	resp, err := HTTPGet(address, "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// HTTPGet gets path from an HTTP port of a raygo process (address is HOST:PORT): HTTPS
// with the certificate and CA of the environment when RAYGO_USE_TLS=1, as the ports
// then serve, else plain HTTP.
func HTTPGet(address, path string) (*http.Response, error) {
	tlsConfig, err := rpcutil.HTTPClientTLS()
	if err != nil {
		return nil, err
	}
	if tlsConfig == nil {
		return http.Get("http://" + address + path)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	return client.Get("https://" + address + path)
}

// MetricValue is the gauge, counter or histogram count of the first series of a family
// with the given label ("" for any series).
func MetricValue(families map[string]*dto.MetricFamily, name, label, labelValue string) (float64, bool) {
	family := families[name]
	if family == nil {
		return 0, false
	}
	for _, m := range family.Metric {
		matches := label == ""
		for _, l := range m.Label {
			if l.GetName() == label && l.GetValue() == labelValue {
				matches = true
			}
		}
		if !matches {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}
