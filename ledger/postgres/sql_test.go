package postgres

import (
	"strings"
	"testing"
)

// TestOneAndManyFormsAgree checks that each single-row statement is its
// multi-row statement with only the input clause changed, so that the two
// forms in sql/*.sql cannot drift apart and decide differently.
func TestOneAndManyFormsAgree(t *testing.T) {
	t.Parallel()
	manyFences := "WITH f AS MATERIALIZED (\n    SELECT f.*, 'claimed'::text AS claimed FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS f(key, token, idx)\n)"
	for _, tc := range []struct {
		one, many string
		input     [][2]string // {in the *Many form, in the *One form}
	}{
		{"ClaimOne", "ClaimMany", [][2]string{{
			"SELECT u.idx, string_to_array(u.cands, ',') AS keys, u.fingerprint, $3::text AS week, u.run_id, u.lease\n" +
				"        FROM unnest($1::text[], $2::text[], $4::text[], $5::bigint[]) WITH ORDINALITY\n" +
				"            AS u(cands, fingerprint, run_id, lease, idx)\n",
			"SELECT u.idx, string_to_array(u.cands, ',') AS keys, u.fingerprint, u.week, u.run_id, u.lease\n" +
				"        FROM (VALUES ($1::text, $2::text, $3::text, $4::text, $5::bigint, 1::bigint))\n" +
				"            AS u(cands, fingerprint, week, run_id, lease, idx)\n",
		}}},
		{"StartOne", "StartMany", [][2]string{
			{manyFences, "WITH f AS (\n    SELECT $1::text AS key, $2::bigint AS token, 1::bigint AS idx, 'claimed'::text AS claimed\n)"},
			{"r.key = ANY($1::text[]) AND r.iso_week = $5::text AND r.key = f.key", "r.key = f.key AND r.iso_week = $5::text"},
		}},
		{"FinishOne", "FinishMany", [][2]string{
			{"WITH f AS MATERIALIZED (\n    SELECT f.*, 'claimed'::text AS claimed FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::boolean[],\n            $7::text[], $8::text[], $9::text[], $12::text[]) WITH ORDINALITY\n        AS f(key, token, state, ref, next, maybe, reason, run_id, detail, address_key, idx)\n)",
				"WITH f AS (\n    SELECT $1::text AS key, $2::bigint AS token, $3::text AS state, $4::text AS ref, $5::bigint AS next,\n        $6::boolean AS maybe, $7::text AS reason, $8::text AS run_id, $9::text AS detail, $12::text AS address_key, 1::bigint AS idx,\n        'claimed'::text AS claimed\n)"},
			{"r.key = ANY($1::text[]) AND r.iso_week = $11::text AND r.key = f.key AND r.claim_token = f.token\n        AND r.state = f.claimed",
				"r.key = f.key AND r.iso_week = $11::text AND r.claim_token = f.token AND r.state = f.claimed"},
		}},
	} {
		many := queries.Get(tc.many)
		for _, in := range tc.input {
			if strings.Count(many, in[0]) != 1 {
				t.Fatalf("%s: the input clause %q is not there once", tc.many, in[0])
			}
			many = strings.Replace(many, in[0], in[1], 1)
		}
		if one := queries.Get(tc.one); one != many {
			t.Errorf("%s differs from %s beyond its input clause:\n%s\n---\n%s", tc.one, tc.many, one, many)
		}
	}
}
