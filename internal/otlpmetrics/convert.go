package otlpmetrics

import (
	"errors"
	"fmt"
	"math"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
)

// ResourceMetrics converts Prometheus metric families (a registry's
// Gather) to OTLP's form: a counter is a monotonic cumulative sum from
// start, a gauge (or an untyped series) a gauge at end, a histogram a
// cumulative explicit-bucket histogram from start; the labels and attrs
// are each data point's attributes. A summary has no counterpart here and
// is refused, as is a family with no name.
func ResourceMetrics(mfs []*dto.MetricFamily, res *resource.Resource, attrs []attribute.KeyValue, start, end time.Time) (*metricdata.ResourceMetrics, error) {
	var ms []metricdata.Metrics
	for _, mf := range mfs {
		if mf.GetName() == "" {
			return nil, errors.New("a metric family without a name")
		}
		m := metricdata.Metrics{Name: mf.GetName(), Description: mf.GetHelp()}
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			sum := metricdata.Sum[float64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true}
			for _, s := range mf.GetMetric() {
				sum.DataPoints = append(sum.DataPoints, metricdata.DataPoint[float64]{
					Attributes: attributes(s, attrs), StartTime: start, Time: end, Value: s.GetCounter().GetValue()})
			}
			m.Data = sum
		case dto.MetricType_GAUGE, dto.MetricType_UNTYPED:
			var g metricdata.Gauge[float64]
			for _, s := range mf.GetMetric() {
				v := s.GetGauge().GetValue()
				if mf.GetType() == dto.MetricType_UNTYPED {
					v = s.GetUntyped().GetValue()
				}
				g.DataPoints = append(g.DataPoints, metricdata.DataPoint[float64]{Attributes: attributes(s, attrs), Time: end, Value: v})
			}
			m.Data = g
		case dto.MetricType_HISTOGRAM:
			h := metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality}
			for _, s := range mf.GetMetric() {
				h.DataPoints = append(h.DataPoints, histogramPoint(s, attrs, start, end))
			}
			m.Data = h
		default:
			return nil, fmt.Errorf("metric %s: a %s has no OTLP form here", mf.GetName(), mf.GetType())
		}
		ms = append(ms, m)
	}
	return &metricdata.ResourceMetrics{Resource: res, ScopeMetrics: []metricdata.ScopeMetrics{{Scope: instrumentation.Scope{Name: Scope}, Metrics: ms}}}, nil
}

// histogramPoint turns Prometheus's cumulative buckets into OTLP's
// per-bucket counts: one more count than bounds, the last above them all.
func histogramPoint(s *dto.Metric, attrs []attribute.KeyValue, start, end time.Time) metricdata.HistogramDataPoint[float64] {
	h := s.GetHistogram()
	p := metricdata.HistogramDataPoint[float64]{Attributes: attributes(s, attrs), StartTime: start, Time: end,
		Count: h.GetSampleCount(), Sum: h.GetSampleSum()}
	var below uint64
	for _, b := range h.GetBucket() {
		if math.IsInf(b.GetUpperBound(), 1) {
			continue // the count above the last bound is what is left
		}
		p.Bounds = append(p.Bounds, b.GetUpperBound())
		p.BucketCounts = append(p.BucketCounts, b.GetCumulativeCount()-below)
		below = b.GetCumulativeCount()
	}
	p.BucketCounts = append(p.BucketCounts, h.GetSampleCount()-below)
	return p
}

// attributes are a series' labels and attrs.
func attributes(s *dto.Metric, attrs []attribute.KeyValue) attribute.Set {
	kv := make([]attribute.KeyValue, 0, len(s.GetLabel())+len(attrs))
	for _, l := range s.GetLabel() {
		kv = append(kv, attribute.String(l.GetName(), l.GetValue()))
	}
	return attribute.NewSet(append(kv, attrs...)...)
}
