package digest

import (
	"errors"
	"math"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFormatAmount(t *testing.T) {
	t.Parallel()
	tests := []struct {
		minor int64
		code  string
		want  string
	}{
		{0, "EUR", "0.00 EUR"},
		{5, "EUR", "0.05 EUR"},
		{-5, "EUR", "-0.05 EUR"},
		{-1250, "EUR", "-12.50 EUR"},
		{99999, "EUR", "999.99 EUR"},
		{100000, "EUR", "1,000.00 EUR"},
		{123456, "EUR", "1,234.56 EUR"},
		{-123456789, "EUR", "-1,234,567.89 EUR"},
		{0, "JPY", "0 JPY"},
		{1234, "JPY", "1,234 JPY"},
		{-980, "JPY", "-980 JPY"},
		{1234567, "BHD", "1,234.567 BHD"},
		{-1, "BHD", "-0.001 BHD"},
		{750500, "KWD", "750.500 KWD"},
		{12345, "CLF", "1.2345 CLF"},
		{-8720, "CHF", "-87.20 CHF"},
		{math.MaxInt64, "JPY", "9,223,372,036,854,775,807 JPY"},
		{math.MinInt64, "EUR", "-92,233,720,368,547,758.08 EUR"},
	}
	for _, tt := range tests {
		got, err := FormatAmount(tt.minor, tt.code)
		if err != nil || got != tt.want {
			t.Errorf("FormatAmount(%d, %s) = %q, %v; want %q", tt.minor, tt.code, got, err, tt.want)
		}
	}
	for _, code := range []string{"", "eur", "EU", "EURO", "ABC", "E R"} {
		if got, err := FormatAmount(1, code); !errors.Is(err, ErrUnknownCurrency) {
			t.Errorf("FormatAmount(1, %q) = %q, %v; want ErrUnknownCurrency", code, got, err)
		}
	}
}

func TestValidCurrency(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]bool{
		"EUR": true, "GBP": true, "USD": true, "JPY": true, "BHD": true, "CHF": true, "KWD": true,
		"eur": false, "Eur": false, "EU": false, "EURO": false, "": false, "ABC": false, "E1R": false, " EU": false, "ÉUR": false,
	} {
		if got := ValidCurrency(code); got != want {
			t.Errorf("ValidCurrency(%q) = %v, want %v", code, got, want)
		}
	}
}

func TestHumanKind(t *testing.T) {
	t.Parallel()
	for kind, want := range map[string]string{
		"card_payment": "Card payment", "transfer_in": "Transfer received", "transfer_out": "Transfer sent",
		"fee": "Fee", "atm-withdrawal": "Atm withdrawal", "": "Activity", "_": "Activity", "ünïcode_kind": "Ünïcode kind",
		"line\nbreak": "Line break",
	} {
		if got := humanKind(kind); got != want {
			t.Errorf("humanKind(%q) = %q, want %q", kind, got, want)
		}
	}
}

func TestWeekRange(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		week ISOWeek
		loc  *time.Location
		want string
	}{
		{ISOWeek{2026, 48}, time.UTC, "Nov 23\u2009–\u200929, 2026"},
		{ISOWeek{2026, 49}, time.UTC, "Nov 30\u2009–\u2009Dec 6, 2026"},
		{ISOWeek{2026, 53}, berlin, "Dec 28, 2026\u2009–\u2009Jan 3, 2027"},
		{ISOWeek{2026, 43}, berlin, "Oct 19\u2009–\u200925, 2026"}, // 169 hours
	} {
		if got := weekRange(tt.week.Start(tt.loc), tt.week.End(tt.loc)); got != tt.want {
			t.Errorf("weekRange(%s) = %q, want %q", tt.week, got, tt.want)
		}
	}
}

// renderDigest builds a digest of one customer with the given rows in
// 2026-W48, in loc.
func renderDigest(t *testing.T, c Customer, loc *time.Location, rows ...Activity) (Digest, Rendered) {
	t.Helper()
	d, err := Build(Record{Customer: c, Activity: rows}, Spec{Week: ISOWeek{2026, 48}, Location: loc, Type: "weekly_activity", Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := Render(&d)
	if err != nil {
		t.Fatal(err)
	}
	return d, out
}

func row(at string, kind string, amount int64, cur, desc string) Activity {
	o, err := time.Parse(time.RFC3339, at)
	if err != nil {
		panic(err)
	}
	return Activity{OccurredAt: o, RecordedAt: o, Kind: kind, AmountMinor: amount, Currency: cur, Description: desc}
}

func TestRenderEscapes(t *testing.T) {
	t.Parallel()
	c := Customer{ID: "c1", Email: "a@example.com", Name: "<script>alert(1)</script> & Co"}
	_, out := renderDigest(t, c, time.UTC,
		row("2026-11-24T10:00:00Z", "card_payment", -4275, "USD", `Tom <b>&</b> Jerry's "Diner"`),
		row("2026-11-24T11:00:00Z", "fee", -1, "USD", `<img src=x onerror=alert(1)>`))
	for _, bad := range []string{"<script>", "</script>", "<b>", "</b>", "<img", "& Co", "&</b>"} {
		if strings.Contains(out.HTML, bad) {
			t.Errorf("HTML contains %q unescaped", bad)
		}
	}
	for _, want := range []string{"Hello &lt;script&gt;alert(1)&lt;/script&gt; &amp; Co,", "Tom &lt;b&gt;&amp;&lt;/b&gt; Jerry&#39;s &#34;Diner&#34;", "&lt;img src=x onerror=alert(1)&gt;"} {
		if !strings.Contains(out.HTML, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// The plain-text part shows the text as it is.
	if !strings.Contains(out.Text, "Hello <script>alert(1)</script> & Co,") || !strings.Contains(out.Text, `Tom <b>&</b> Jerry's "Diner"`) {
		t.Errorf("text part:\n%s", out.Text)
	}
}

func TestRenderControlCharacters(t *testing.T) {
	t.Parallel()
	c := Customer{ID: "c1", Email: "a@example.com", Name: "Eve\r\nBcc: victim@example.com\x00\u202e"}
	_, out := renderDigest(t, c, time.UTC,
		row("2026-11-24T10:00:00Z", "card_payment", -100, "EUR", "line one\nline two\x1b[31m\u2028red\xff"))
	for part, s := range map[string]string{"subject": out.Subject, "text": out.Text, "html": out.HTML} {
		for _, bad := range []string{"\r", "\x00", "\x1b", "\u202e", "\u2028", "\xff"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s contains %q", part, bad)
			}
		}
	}
	if strings.ContainsAny(out.Subject, "\r\n") {
		t.Errorf("subject %q spans lines", out.Subject)
	}
	if !strings.Contains(out.Text, "Hello Eve  Bcc: victim@example.com,\n") {
		t.Errorf("greeting not on one line:\n%s", out.Text)
	}
	if !strings.Contains(out.Text, "line one line two [31m red\uFFFD\n") {
		t.Errorf("description not on one line:\n%s", out.Text)
	}
}

func TestRenderContent(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	c := Customer{ID: "c1", Email: "a@example.com", Name: "Zoë"}
	// 03:00 UTC on Tuesday is still Monday evening in New York.
	_, out := renderDigest(t, c, ny,
		row("2026-11-24T03:00:00Z", "card_payment", -1280, "JPY", "ramen"),
		row("2026-11-25T15:00:00Z", "transfer_in", 123456, "EUR", "salary"),
		row("2026-11-26T15:00:00Z", "interest", 1234, "BHD", "savings"))
	if out.Subject != "Your account activity, Nov 23\u2009–\u200929, 2026" {
		t.Errorf("Subject = %q", out.Subject)
	}
	for _, want := range []string{
		"Hello Zoë,",
		"Mon, Nov 23    -¥1,280  Card payment - ramen\n",
		"Wed, Nov 25  €1,234.56  Transfer received - salary\n",
		"Thu, Nov 26  BHD\u00a01.234  Interest - savings\n",
		"EUR, 1 transaction\n  Money in:   €1,234.56\n  Money out:  €0.00\n  Net change: €1,234.56",
		"Dates are shown in America/New_York",
	} {
		if !strings.Contains(out.Text, want) {
			t.Errorf("text lacks %q:\n%s", want, out.Text)
		}
	}
	for _, want := range []string{">Mon, Nov 23</td>", ">-¥1,280</td>", ">BHD\u00a01.234</td>", "<title>Your account activity, Nov 23\u2009–\u200929, 2026</title>"} {
		if !strings.Contains(out.HTML, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}

func TestRenderEmpty(t *testing.T) {
	t.Parallel()
	_, out := renderDigest(t, Customer{ID: "c1", Email: "a@example.com"}, time.UTC,
		row("2026-11-30T00:00:00Z", "card_payment", -100, "EUR", "next week"))
	if !strings.Contains(out.Text, "Hello,\n\nThere was no activity on your account last week (Nov 23\u2009–\u200929, 2026).") {
		t.Errorf("text:\n%s", out.Text)
	}
	if !strings.Contains(out.HTML, "There was no activity on your account last week.") || strings.Contains(out.HTML, "Totals") {
		t.Errorf("HTML:\n%s", out.HTML)
	}
}

func TestRenderDeterministic(t *testing.T) {
	t.Parallel()
	rows := []Activity{
		row("2026-11-24T10:00:00Z", "card_payment", -4275, "USD", "a"),
		row("2026-11-24T10:00:00Z", "fee", -100, "USD", "b"),
		row("2026-11-25T10:00:00Z", "refund", 4275, "GBP", "c"),
	}
	c := Customer{ID: "c1", Email: "a@example.com", Name: "Zoë"}
	_, want := renderDigest(t, c, time.UTC, rows...)
	_, reversed := renderDigest(t, c, time.UTC, rows[2], rows[1], rows[0])
	if reversed != want {
		t.Error("the input order changed the rendering")
	}
	d, _ := renderDigest(t, c, time.UTC, rows...)
	r, err := NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				got, err := r.Render(&d)
				if err != nil || got != want {
					t.Errorf("concurrent Render differs: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestRenderErrors(t *testing.T) {
	t.Parallel()
	d, _ := renderDigest(t, Customer{ID: "c1"}, time.UTC)
	d.Identity.Type = "monthly_statement"
	if _, err := Render(&d); !errors.Is(err, ErrUnknownType) {
		t.Errorf("unknown type: %v", err)
	}
	d, err := Build(Record{Customer: Customer{ID: "c1"}, Activity: []Activity{row("2026-11-24T10:00:00Z", "fee", -1, "XYZ", "")}},
		Spec{Week: ISOWeek{2026, 48}, Type: "weekly_activity", Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Render(&d); !errors.Is(err, ErrUnknownCurrency) {
		t.Errorf("unknown currency: %v", err)
	}
}

// The wording of issue 21, in every language and regional variant: no ISO
// week token and no internal ids in what the customer reads, the previous
// week named as such, "net" not written as a balance, table heads without
// the text part's colon, French U+202F before a colon, the language's own
// comma, es-419's vocabulary.
func TestWordingBankWouldSign(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		locale string
		want   []string // in the text part
		not    []string // in any part
	}{
		{"en-US", []string{"last week (Nov 23\u2009–\u200929, 2026)", "Net change: ", "EUR, 1 transaction"}, []string{"this week", "Net:"}},
		{"de-DE", []string{"der Vorwoche (23.–29. Nov. 2026)", "Nettoveränderung: "}, []string{"Saldo", "dieser Woche"}},
		{"fr-FR", []string{"la semaine dernière (23–29 nov. 2026)", "Variation nette\u202f: ", "Entrées\u202f:"}, []string{"Solde", "cette semaine", " :", " ;"}},
		{"es-ES", []string{"la semana pasada (23–29 nov 2026)", "Variación neta: ", "Retirada de efectivo"}, []string{"Saldo", "esta semana"}},
		{"es-MX", []string{"la semana pasada (23–29 de nov de 2026)", "Retiro de efectivo", "cada moneda"}, []string{"Saldo", "Retirada", "Importe", "Divisa"}},
		{"ja-JP", []string{"先週（2026年11月23日～29日）", "EUR、1件", "差引："}, []string{"今週", " 件"}},
		{"ar-AE", []string{"الأسبوع الماضي", "EUR، "}, []string{"هذا الأسبوع", "EUR, "}},
	} {
		c := Customer{ID: "c1", Email: "a@example.com", Name: "N", Locale: tt.locale}
		_, out := renderDigest(t, c, time.UTC, row("2026-11-24T10:00:00Z", "cash_withdrawal", -4275, "EUR", "a"))
		for _, part := range []string{out.Subject, out.Text, out.HTML} {
			for _, bad := range append(tt.not, "W48", "weekly_activity", "v1,") {
				if strings.Contains(part, bad) {
					t.Errorf("%s: %q in:\n%s", tt.locale, bad, part)
				}
			}
		}
		for _, want := range tt.want {
			if !strings.Contains(out.Text, want) {
				t.Errorf("%s: text lacks %q:\n%s", tt.locale, want, out.Text)
			}
		}
		if regexp.MustCompile(`[:：]\s*</th>`).MatchString(out.HTML) {
			t.Errorf("%s: a table head ends with a colon:\n%s", tt.locale, out.HTML)
		}
	}
}

// A customer's optional time zone shows the rows' dates in it and the
// footer names it; the week's bounds and range stay the run's zone's, and
// the zone enters the canonical form only when set.
func TestCustomerTimeZone(t *testing.T) {
	t.Parallel()
	// 20:00 UTC on Monday is Tuesday in Tokyo; 23:00 UTC on Sunday 29th
	// is Monday 30th there, after the run's week.
	rows := []Activity{row("2026-11-23T20:00:00Z", "card_payment", -100, "JPY", "a"), row("2026-11-29T23:00:00Z", "fee", -5, "JPY", "b")}
	plain, plainOut := renderDigest(t, Customer{ID: "c1", Email: "a@example.com", Locale: "en-US"}, time.UTC, rows...)
	zoned, out := renderDigest(t, Customer{ID: "c1", Email: "a@example.com", Locale: "en-US", TimeZone: "Asia/Tokyo"}, time.UTC, rows...)
	for _, want := range []string{"Tue, Nov 24", "Mon, Nov 30", "Dates are shown in Asia/Tokyo", "last week (Nov 23\u2009–\u200929, 2026)"} {
		if !strings.Contains(out.Text, want) {
			t.Errorf("text lacks %q:\n%s", want, out.Text)
		}
	}
	for _, want := range []string{"Mon, Nov 23", "Sun, Nov 29", "Dates are shown in UTC"} {
		if !strings.Contains(plainOut.Text, want) {
			t.Errorf("without a zone, text lacks %q:\n%s", want, plainOut.Text)
		}
	}
	if !zoned.From.Equal(plain.From) || !zoned.To.Equal(plain.To) || len(zoned.Activity) != 2 {
		t.Errorf("the zone moved the week: %v–%v, %d rows", zoned.From, zoned.To, len(zoned.Activity))
	}
	if strings.Contains(string(plain.Canonical()), "time_zone") || !strings.Contains(string(zoned.Canonical()), `"locale":"en-US","time_zone":"Asia/Tokyo"}`) {
		t.Errorf("canonical forms:\n%s\n%s", plain.Canonical(), zoned.Canonical())
	}
	if plain.Fingerprint() == zoned.Fingerprint() {
		t.Error("the zone does not change the fingerprint")
	}
	for _, bad := range []string{"Mars/Olympus_Mons", "Local", "../../etc/passwd"} {
		if err := ValidTimeZone(bad); !errors.Is(err, ErrBadTimeZone) {
			t.Errorf("ValidTimeZone(%q) = %v", bad, err)
		}
	}
}
