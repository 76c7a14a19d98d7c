package main

import (
	"flag"
	"reflect"
	"testing"
)

// Every field of config is the value of exactly one row of settingsTable,
// and every row has its own field: st.setting never panics, and --help's
// table of variables names every value a command can read.
func TestEveryConfigFieldIsASetting(t *testing.T) {
	t.Parallel()
	s := register(flag.NewFlagSet("x", flag.ContinueOnError), &Env{Getenv: func(string) string { return "" }})
	rows := map[*string]string{}
	for _, st := range settingsTable {
		p := st.field(&s.config)
		if prev, ok := rows[p]; ok {
			t.Errorf("%s and %s share a config field", prev, st.env)
		}
		rows[p] = st.env
	}
	v := reflect.ValueOf(&s.config).Elem()
	for i := range v.NumField() {
		p := v.Field(i).Addr().Interface().(*string)
		if _, ok := rows[p]; !ok {
			t.Errorf("config.%s is no setting's field", v.Type().Field(i).Name)
		}
	}
	if len(rows) != v.NumField() {
		t.Errorf("%d settings, %d config fields", len(rows), v.NumField())
	}
}
