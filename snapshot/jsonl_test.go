package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
)

const goodActivity = `{"occurred_at":"2026-11-23T09:15:00Z","recorded_at":"2026-11-23T09:15:02.5+01:00","kind":"card_payment","amount_minor":-450,"currency":"EUR","description":"Café <b>&</b>"}`

// line returns a valid line for customer id with the given activity JSON,
// which extra top-level members (",\"k\":v") may follow.
func line(id, activity, extra string) string {
	return `{"customer_id":"` + id + `","email":"` + id + `@example.com","name":"Zoë","locale":"de-DE","activity":[` + activity + `]` + extra + `}`
}

// act returns goodActivity with one member replaced (or removed, with
// value ""), e.g. act("currency", `"eur"`).
func act(key, value string) string {
	var parts []string
	for _, kv := range strings.Split(strings.Trim(goodActivity, "{}"), `,"`) {
		kv = strings.TrimPrefix(kv, `"`)
		k, v, _ := strings.Cut(kv, `":`)
		if k == key {
			if value == "" {
				continue
			}
			v = value
		}
		parts = append(parts, `"`+k+`":`+v)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func writeSnapshot(t *testing.T, lines ...string) *File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "snap.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// badLines are second lines after line("cust_a", goodActivity, ""); each
// is bad in field.
var badLines = []struct {
	name, line, field, want string
}{
	{"not JSON", `{"customer_id":`, "customer_id", "invalid JSON: unexpected end of line"},
	{"bad token", `{"customer_id" 1}`, "customer_id", "invalid JSON: expected colon"},
	{"bad key", `{1:2}`, "", "invalid JSON"},
	{"truncated", `{"customer_id":"cust_b"`, "", "invalid JSON"},
	{"array", `[1,2]`, "", "must be a JSON object"},
	{"trailing data", line("cust_b", goodActivity, "") + ` {}`, "", "unexpected data after"},
	{"unknown field", line("cust_b", goodActivity, `,"vip":true`), "vip", "unknown field"},
	{"unknown activity field", line("cust_b", strings.Replace(goodActivity, `"kind"`, `"amount":1,"kind"`, 1), ""), "activity[0].amount", "unknown field"},
	{"field twice", line("cust_b", goodActivity, `,"email":"x@example.com"`), "email", "appears twice"},
	{"no customer_id", `{"email":"b@example.com"}`, "customer_id", "required field is missing"},
	{"no email", `{"customer_id":"cust_b"}`, "email", "required field is missing"},
	{"null email", `{"customer_id":"cust_b","email":null}`, "email", "must not be null"},
	{"null name", `{"customer_id":"cust_b","email":"b@example.com","name":null}`, "name", "must not be null"},
	{"null activity", `{"customer_id":"cust_b","email":"b@example.com","activity":null}`, "activity", "must not be null"},
	{"activity object", `{"customer_id":"cust_b","email":"b@example.com","activity":{}}`, "activity", "must be an array"},
	{"activity row not object", line("cust_b", `1`, ""), "activity[0]", "must be a JSON object"},
	{"second row bad", line("cust_b", goodActivity+","+act("kind", ""), ""), "activity[1].kind", "required field is missing"},
	{"no occurred_at", line("cust_b", act("occurred_at", ""), ""), "activity[0].occurred_at", "required field is missing"},
	{"no recorded_at", line("cust_b", act("recorded_at", ""), ""), "activity[0].recorded_at", "required field is missing"},
	{"no kind", line("cust_b", act("kind", ""), ""), "activity[0].kind", "required field is missing"},
	{"no amount", line("cust_b", act("amount_minor", ""), ""), "activity[0].amount_minor", "required field is missing"},
	{"no currency", line("cust_b", act("currency", ""), ""), "activity[0].currency", "required field is missing"},
	{"timestamp with space", line("cust_b", act("occurred_at", `"2026-11-23 09:15:00Z"`), ""), "activity[0].occurred_at", "not an RFC 3339 timestamp"},
	{"timestamp without zone", line("cust_b", act("recorded_at", `"2026-11-23T09:15:00"`), ""), "activity[0].recorded_at", "not an RFC 3339 timestamp"},
	{"timestamp out of range", line("cust_b", act("occurred_at", `"2026-02-30T09:15:00Z"`), ""), "activity[0].occurred_at", "not an RFC 3339 timestamp"},
	{"timestamp as number", line("cust_b", act("occurred_at", `1764000000`), ""), "activity[0].occurred_at", "must be a string"},
	{"lower-case currency", line("cust_b", act("currency", `"eur"`), ""), "activity[0].currency", "not an ISO 4217"},
	{"unknown currency", line("cust_b", act("currency", `"ABC"`), ""), "activity[0].currency", "not an ISO 4217"},
	{"long currency", line("cust_b", act("currency", `"EURO"`), ""), "activity[0].currency", "not an ISO 4217"},
	{"numeric currency", line("cust_b", act("currency", `978`), ""), "activity[0].currency", "must be a string"},
	{"fractional amount", line("cust_b", act("amount_minor", `1.5`), ""), "activity[0].amount_minor", "not an integer"},
	{"amount 1.0", line("cust_b", act("amount_minor", `1.0`), ""), "activity[0].amount_minor", "not an integer"},
	{"exponent amount", line("cust_b", act("amount_minor", `1e3`), ""), "activity[0].amount_minor", "not an integer"},
	{"quoted amount", line("cust_b", act("amount_minor", `"12"`), ""), "activity[0].amount_minor", "not an integer"},
	{"null amount", line("cust_b", act("amount_minor", `null`), ""), "activity[0].amount_minor", "must not be null"},
	{"huge amount", line("cust_b", act("amount_minor", `9223372036854775808`), ""), "activity[0].amount_minor", "does not fit in 64 bits"},
	{"bool amount", line("cust_b", act("amount_minor", `true`), ""), "activity[0].amount_minor", "not an integer"},
	{"kind with spaces", line("cust_b", act("kind", `"Card Payment"`), ""), "activity[0].kind", "not a kind"},
	{"empty kind", line("cust_b", act("kind", `""`), ""), "activity[0].kind", "not a kind"},
	{"customer_id with pipe", line("cust_b|x", goodActivity, ""), "customer_id", "contains '|'"},
	{"empty customer_id", `{"customer_id":"","email":"b@example.com"}`, "customer_id", "customer is empty"},
	{"customer_id with control", `{"customer_id":"cust_b\u0007","email":"b@example.com"}`, "customer_id", "control character"},
	{"customer_id too long", `{"customer_id":"cust_b` + strings.Repeat("x", 200) + `","email":"b@example.com"}`, "customer_id", "at most 200"},
	{"numeric customer_id", `{"customer_id":42,"email":"b@example.com"}`, "customer_id", "must be a string"},
	{"not an email", `{"customer_id":"cust_b","email":"nobody"}`, "email", "not a bare email address"},
	{"email with name", `{"customer_id":"cust_b","email":"Bob <b@example.com>"}`, "email", "not a bare email address"},
	{"email with a space", `{"customer_id":"cust_b","email":"jane roe@corp.example"}`, "email", "not a bare email address"},
	{"email quoted with a space", `{"customer_id":"cust_b","email":"\"jane roe\"@corp.example"}`, "email", "not a bare email address"},
	{"name not UTF-8", "{\"customer_id\":\"cust_b\",\"email\":\"b@example.com\",\"name\":\"\xff\xfe\"}", "name", "not valid UTF-8"},
	{"description not UTF-8", line("cust_b", act("description", "\"caf\xe9\""), ""), "activity[0].description", "not valid UTF-8"},
	{"name with NUL", `{"customer_id":"cust_b","email":"b@example.com","name":"Bo\u0000b"}`, "name", "NUL"},
	{"description with NUL", line("cust_b", act("description", `"x\u0000"`), ""), "activity[0].description", "NUL"},
	{"name with a lone surrogate", `{"customer_id":"cust_b","email":"b@example.com","name":"\ud800"}`, "name", "lone surrogate"},
	{"unsubscribed_at not a time", line("cust_b", goodActivity, `,"unsubscribed_at":"yesterday"`), "unsubscribed_at", "not an RFC 3339 timestamp"},
	{"unsubscribed_at as bool", line("cust_b", goodActivity, `,"unsubscribed_at":true`), "unsubscribed_at", "must be a string"},
	{"locale with underscore", `{"customer_id":"cust_b","email":"b@example.com","locale":"en_GB"}`, "locale", "not a BCP 47"},
	{"unknown time_zone", line("cust_b", goodActivity, `,"time_zone":"Mars/Olympus_Mons"`), "time_zone", "not an IANA time zone"},
	{"time_zone Local", line("cust_b", goodActivity, `,"time_zone":"Local"`), "time_zone", "not an IANA time zone"},
	{"time_zone path", line("cust_b", goodActivity, `,"time_zone":"../../etc/passwd"`), "time_zone", "not an IANA time zone"},
	{"time_zone offset", line("cust_b", goodActivity, `,"time_zone":"+09:00"`), "time_zone", "not an IANA time zone"},
	{"null time_zone", line("cust_b", goodActivity, `,"time_zone":null`), "time_zone", "must not be null"},
	{"duplicate customer", line("cust_a", goodActivity, ""), "customer_id", `duplicate customer "cust_a"`},
	{"out of order", line("cust_0", goodActivity, ""), "customer_id", "must be sorted by customer_id"},
}

func TestBadLines(t *testing.T) {
	t.Parallel()
	for _, tt := range badLines {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := writeSnapshot(t, line("cust_a", goodActivity, ""), tt.line)
			err := f.Check(context.Background())
			var ce *CheckError
			if !errors.As(err, &ce) || ce.Total != 1 {
				t.Fatalf("Check = %v, want one bad line", err)
			}
			bad := ce.Bad[0]
			if bad.Where != f.Path()+":2" || bad.Field != tt.field || !strings.Contains(bad.Err.Error(), tt.want) {
				t.Errorf("bad line %q at %q field %q, want line 2, field %q, saying %q", bad.Err, bad.Where, bad.Field, tt.field, tt.want)
			}
			if !strings.Contains(err.Error(), "snap.jsonl:2: ") {
				t.Errorf("Check error %q does not name file and line", err)
			}
		})
	}
}

func TestGoodLine(t *testing.T) {
	t.Parallel()
	f := writeSnapshot(t,
		line("cust_a", goodActivity, ""),
		"",
		`  {"customer_id":"cust_b","email":"b@example.com"}  `+"\r",
		`{"customer_id":"cust_c","email":"c@example.com","name":"","locale":"","activity":[]}`,
		line("cust_d", act("description", ""), ""),
	)
	if err := f.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs := collect(t, f, digest.Shard{})
	if len(recs) != 4 {
		t.Fatalf("got %d records, want 4", len(recs))
	}
	a := recs[0]
	want := digest.Activity{
		OccurredAt:  time.Date(2026, 11, 23, 9, 15, 0, 0, time.UTC),
		RecordedAt:  time.Date(2026, 11, 23, 8, 15, 2, 5e8, time.UTC),
		Kind:        "card_payment",
		AmountMinor: -450,
		Currency:    "EUR",
		Description: "Café <b>&</b>",
	}
	if a.Customer != (digest.Customer{ID: "cust_a", Email: "cust_a@example.com", Name: "Zoë", Locale: "de-DE"}) || len(a.Activity) != 1 {
		t.Fatalf("record %+v", a)
	}
	got := a.Activity[0]
	if !got.OccurredAt.Equal(want.OccurredAt) || !got.RecordedAt.Equal(want.RecordedAt) || got.Kind != want.Kind ||
		got.AmountMinor != want.AmountMinor || got.Currency != want.Currency || got.Description != want.Description {
		t.Errorf("activity %+v, want %+v", got, want)
	}
	if recs[1].Customer.Name != "" || recs[1].Activity != nil || recs[3].Activity[0].Description != "" {
		t.Errorf("optional fields: %+v, %+v", recs[1], recs[3])
	}
}

// collect reads every record of f in shard s and fails on any error.
func collect(t *testing.T, f *File, s digest.Shard) []digest.Record {
	t.Helper()
	var recs []digest.Record
	for rec, err := range f.Records(context.Background(), digest.SourceQuery{Shard: s}) {
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	return recs
}

// unsubscribed_at is optional: absent or null is subscribed, a timestamp
// suppresses the customer.
func TestSuppressionField(t *testing.T) {
	t.Parallel()
	f := writeSnapshot(t,
		line("cust_a", goodActivity, ""),
		line("cust_b", goodActivity, `,"unsubscribed_at":null`),
		line("cust_c", goodActivity, `,"unsubscribed_at":"2026-11-20T08:00:00Z"`),
	)
	if err := f.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []bool
	for _, r := range collect(t, f, digest.Shard{}) {
		got = append(got, r.Customer.Suppressed)
	}
	if fmt.Sprint(got) != "[false false true]" {
		t.Errorf("suppressed = %v, want [false false true]", got)
	}
}

// time_zone is optional (the contract before it stays valid): absent or
// "" is none, an IANA name is read as it is.
func TestTimeZoneField(t *testing.T) {
	t.Parallel()
	f := writeSnapshot(t,
		line("cust_a", goodActivity, ""),
		line("cust_b", goodActivity, `,"time_zone":""`),
		line("cust_c", goodActivity, `,"time_zone":"Asia/Tokyo"`),
	)
	if err := f.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range collect(t, f, digest.Shard{}) {
		got = append(got, r.Customer.TimeZone)
	}
	if fmt.Sprintf("%q", got) != `["" "" "Asia/Tokyo"]` {
		t.Errorf("time zones = %q", got)
	}
}

func TestLenientStreaming(t *testing.T) {
	t.Parallel()
	f := writeSnapshot(t,
		line("cust_a", goodActivity, ""),
		line("cust_b", act("currency", `"eur"`), ""),
		`not json`,
		line("cust_c", goodActivity, ""),
	)
	if got, want := stream(t, f), "cust_a,:2,:3,cust_c"; strings.Join(got, ",") != want {
		t.Errorf("stream %v, want %s", got, want)
	}
}

// stream reads all of f and returns, in order, the customer id of each
// record and ":N" for each bad line N; any other error fails the test.
func stream(t *testing.T, f *File) []string {
	t.Helper()
	var got []string
	for rec, err := range f.Records(context.Background(), digest.SourceQuery{}) {
		var bad *digest.BadRecordError
		switch {
		case errors.As(err, &bad):
			got = append(got, strings.TrimPrefix(bad.Where, f.Path()))
		case err != nil:
			t.Fatal(err)
		default:
			got = append(got, rec.Customer.ID)
		}
	}
	return got
}

func TestCheckListsBadLines(t *testing.T) {
	t.Parallel()
	lines := []string{line("cust_000", goodActivity, "")}
	for i := 1; i <= 25; i++ {
		lines = append(lines, line(fmt.Sprintf("cust_%03d", i), act("amount_minor", "1.5"), ""))
	}
	f := writeSnapshot(t, lines...)
	err := f.Check(context.Background())
	var ce *CheckError
	if !errors.As(err, &ce) || ce.Total != 25 || len(ce.Bad) != MaxListed {
		t.Fatalf("Check = %v", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "snapshot "+f.Path()+": 25 bad lines\n") || !strings.Contains(msg, "snap.jsonl:21: activity[0].amount_minor") ||
		strings.Contains(msg, "snap.jsonl:22:") || !strings.HasSuffix(msg, "\n  and 5 more") {
		t.Errorf("Check error:\n%s", msg)
	}
	var bad *digest.BadRecordError
	if !errors.As(err, &bad) || bad.Where != f.Path()+":2" {
		t.Errorf("errors.As finds %v", bad)
	}
	if err := writeSnapshot(t, lines[0]).Check(context.Background()); err != nil {
		t.Errorf("Check of a good file: %v", err)
	}
}

func TestShardFilter(t *testing.T) {
	t.Parallel()
	f, err := OpenFile(filepath.Join("..", "examples", "snapshot.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	all := collect(t, f, digest.Shard{})
	if len(all) != 22 {
		t.Fatalf("example has %d customers", len(all))
	}
	seen := map[string]int{}
	for i := range 3 {
		s := digest.Shard{Index: i, Count: 3}
		for _, rec := range collect(t, f, s) {
			if !s.Has(rec.Customer.ID) {
				t.Errorf("shard %s yielded %s", s, rec.Customer.ID)
			}
			seen[rec.Customer.ID]++
		}
	}
	for _, rec := range all {
		if seen[rec.Customer.ID] != 1 {
			t.Errorf("%s is in %d shards", rec.Customer.ID, seen[rec.Customer.ID])
		}
	}

	// A bad line is reported by the shard of its customer, or by every
	// shard when its customer cannot be read.
	g := writeSnapshot(t, line("cust_a", act("currency", `"eur"`), ""), `garbage`)
	for i := range 2 {
		s := digest.Shard{Index: i, Count: 2}
		var where []string
		for _, err := range g.Records(context.Background(), digest.SourceQuery{Shard: s}) {
			var bad *digest.BadRecordError
			if !errors.As(err, &bad) {
				t.Fatalf("shard %s: %v", s, err)
			}
			where = append(where, strings.TrimPrefix(bad.Where, g.Path()))
		}
		want := ":2"
		if s.Has("cust_a") {
			want = ":1,:2"
		}
		if strings.Join(where, ",") != want {
			t.Errorf("shard %s reported %v, want %s", s, where, want)
		}
	}
}

func TestLongLines(t *testing.T) {
	t.Parallel()
	long := line("cust_b", goodActivity, `,"name2":"`+strings.Repeat("x", 600)+`"`)
	f := writeSnapshot(t, line("cust_a", goodActivity, ""), long, line("cust_c", goodActivity, ""), long)
	f.maxLine = 512
	if err := f.Check(context.Background()); err == nil || !strings.Contains(err.Error(), "snap.jsonl:4: line longer than 512 bytes") {
		t.Errorf("Check = %v", err)
	}
	if got, want := stream(t, f), "cust_a,:2,cust_c,:4"; strings.Join(got, ",") != want {
		t.Errorf("stream %v, want %s", got, want)
	}
}

func TestOpenFileErrors(t *testing.T) {
	t.Parallel()
	if _, err := OpenFile(filepath.Join(t.TempDir(), "missing.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := OpenFile(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	f := writeSnapshot(t, line("cust_a", goodActivity, ""))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, err := range f.Records(ctx, digest.SourceQuery{}) {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled: %v", err)
		}
	}
	if err := f.Check(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Check: %v", err)
	}
	if err := os.Remove(f.Path()); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(context.Background()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Check of a removed file: %v", err)
	}
}

func FuzzSnapshotLine(f *testing.F) {
	f.Add(line("cust_a", goodActivity, ""))
	for _, tt := range badLines {
		f.Add(tt.line)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rec, ferr := parseLine([]byte(s))
		if ferr != nil {
			if ferr.err == nil {
				t.Fatal("fieldError without an error")
			}
			return
		}
		// Whatever parses is what the rest of the job relies on.
		id := digest.Identity{Customer: rec.Customer.ID, Week: digest.ISOWeek{Year: 2026, Week: 1}, Type: "t", Version: "v"}
		if err := id.Validate(); err != nil {
			t.Fatalf("accepted customer_id %q: %v", rec.Customer.ID, err)
		}
		if rec.Customer.Email == "" {
			t.Fatal("accepted an empty email")
		}
		for _, a := range rec.Activity {
			if !digest.ValidCurrency(a.Currency) || a.Kind == "" || a.OccurredAt.IsZero() || a.RecordedAt.IsZero() {
				t.Fatalf("accepted activity %+v", a)
			}
		}
	})
}

// A query for named customers stops past the last of them once each is
// read; in a file out of order, a named customer after a greater id is read
// on to, and its line says the file is not sorted, instead of the customer
// going missing.
func TestNamedCustomersInUnsortedFile(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		lines []string
		want  string
		line  string
	}{
		{[]string{line("cust_b", goodActivity, ""), line("cust_a", goodActivity, "")}, "cust_a", ":2"},
		{[]string{line("cust_c", goodActivity, ""), line("cust_a", goodActivity, ""), line("cust_b", goodActivity, "")}, "cust_b", ":3"},
	} {
		f := writeSnapshot(t, tt.lines...)
		var got []error
		q := digest.SourceQuery{Week: digest.ISOWeek{Year: 2026, Week: 48}, Location: time.UTC, Customers: []string{tt.want}}
		for rec, err := range f.Records(context.Background(), q) {
			if err == nil {
				t.Fatalf("%s: read %s from a file out of order", tt.want, rec.Customer.ID)
			}
			got = append(got, err)
		}
		var bad *digest.BadRecordError
		if len(got) != 1 || !errors.As(got[0], &bad) || !strings.HasSuffix(bad.Where, tt.line) || !strings.Contains(bad.Error(), "must be sorted by customer_id") {
			t.Errorf("%s: %v, want the line %s out of order", tt.want, got, tt.line)
		}
	}
	// In order, a named customer is read and an absent one is simply not.
	f := writeSnapshot(t, line("cust_a", goodActivity, ""), line("cust_c", goodActivity, ""))
	for _, id := range []string{"cust_a", "cust_b"} {
		q := digest.SourceQuery{Week: digest.ISOWeek{Year: 2026, Week: 48}, Location: time.UTC, Customers: []string{id}}
		var ids []string
		for rec, err := range f.Records(context.Background(), q) {
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, rec.Customer.ID)
		}
		if want := map[string]int{"cust_a": 1, "cust_b": 0}[id]; len(ids) != want {
			t.Errorf("%s: read %v", id, ids)
		}
	}
}
