package metrics

import (
	"math"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Values returns the registry's series as JSON values (Gather), for the
// "metrics" object of a run's final log record: what a push carries, with
// no Pushgateway needed to read it.
func (r *Registry) Values() (map[string]any, error) { return Values(r.reg) }

// Values returns what g gathers by series name, as JSON values: a series
// without labels is its number; a labelled one an object per label, in
// the order the family lists them, {label: {value: number}} (nested once
// more per further label); a histogram its three Prometheus series,
// name_bucket {"le": {bound: cumulative count, "+Inf": count}}, name_sum
// and name_count. A value that is not finite (no JSON number can hold
// it) is the string Prometheus writes for it: "NaN", "+Inf", "-Inf".
func Values(g prometheus.Gatherer) (map[string]any, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				setValue(out, name, m.GetLabel(), m.GetCounter().GetValue())
			case m.Gauge != nil:
				setValue(out, name, m.GetLabel(), m.GetGauge().GetValue())
			case m.Untyped != nil:
				setValue(out, name, m.GetLabel(), m.GetUntyped().GetValue())
			case m.Histogram != nil:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					le := &dto.LabelPair{Name: new("le"), Value: new(strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))}
					setValue(out, name+"_bucket", append(slices.Clip(m.GetLabel()), le), float64(b.GetCumulativeCount()))
				}
				inf := &dto.LabelPair{Name: new("le"), Value: new("+Inf")}
				setValue(out, name+"_bucket", append(slices.Clip(m.GetLabel()), inf), float64(h.GetSampleCount()))
				setValue(out, name+"_sum", m.GetLabel(), h.GetSampleSum())
				setValue(out, name+"_count", m.GetLabel(), float64(h.GetSampleCount()))
			}
		}
	}
	return out, nil
}

// setValue files v under name and its labels in out.
func setValue(out map[string]any, name string, labels []*dto.LabelPair, v float64) {
	var val any = v
	switch {
	case math.IsNaN(v):
		val = "NaN"
	case math.IsInf(v, 1):
		val = "+Inf"
	case math.IsInf(v, -1):
		val = "-Inf"
	}
	if len(labels) == 0 {
		out[name] = val
		return
	}
	at, key := out, name
	for _, l := range labels {
		byLabel := child(at, key)
		at, key = child(byLabel, l.GetName()), l.GetValue()
	}
	at[key] = val
}

// child returns the object at m[key], made when missing.
func child(m map[string]any, key string) map[string]any {
	c, ok := m[key].(map[string]any)
	if !ok {
		c = map[string]any{}
		m[key] = c
	}
	return c
}
