package digest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/currency"
	"golang.org/x/text/language"
)

// The examples of issues 15 and 21, exact as CLDR 48 writes them: fr with
// U+202F between thousands and U+00A0 before a trailing symbol, de and es
// with U+00A0; each region its own way (the fixture test covers them all).
func TestFormatMoneyCLDR(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		locale string
		minor  int64
		code   string
		want   string
	}{
		{"de-DE", 123450, "EUR", "1.234,50\u00a0€"},
		{"fr-FR", 123450, "EUR", "1\u202f234,50\u00a0€"},
		{"en-IE", 123450, "EUR", "€1,234.50"},
		{"ja-JP", 1235, "JPY", "￥1,235"},
		{"de-AT", -450, "EUR", "-€\u00a04,50"},
		{"de-AT", 123456, "EUR", "€\u00a01.234,56"},
		{"de-CH", -1234567, "CHF", "CHF-12'345.67"},
		{"es-MX", 123456, "MXN", "$1,234.56"},
		{"es-MX", -123456789, "EUR", "-EUR\u00a01,234,567.89"},
		{"es-AR", 123456, "EUR", "EUR\u00a01,234.56"}, // es-419's
		{"en-IN", 1234567890, "INR", "₹1,23,45,678.90"},
		{"en-GB", 123456, "USD", "US$1,234.56"},
		{"fr-CH", 123456, "CHF", "1'234.56\u00a0CHF"}, // CLDR 48.2; 48.0 (ICU 78) had U+202F
		{"fr-CA", 123456, "CAD", "1\u00a0234,56\u00a0$"},
		{"ar-AE", 123450, "AED", "\u200f1,234.50\u00a0د.إ.\u200f"},
		{"ar", -123450, "AED", "\u200f\u200e-1,234.50\u00a0د.إ.\u200f"},
		{"es-ES", 123450, "EUR", "1234,50\u00a0€"}, // es: minimumGroupingDigits 2
		{"es-ES", 1234500, "EUR", "12.345,00\u00a0€"},
		{"en-US", -123456789, "USD", "-$1,234,567.89"},
		{"en-GB", 1234, "BHD", "BHD\u00a01.234"},
		{"ar-BH", -12345, "BHD", "\u061c-\u200f١٢٫٣٤٥\u00a0د.ب.\u200f"},
		{"pl-PL", 4599, "PLN", "PLN\u00a045.99"}, // not shipped: English
		{"", 100, "EUR", "€1.00"},
	} {
		got, err := FormatMoney(tt.locale, tt.minor, tt.code)
		if err != nil || got != tt.want {
			t.Errorf("FormatMoney(%s, %d, %s) = %q, %v; want %q", tt.locale, tt.minor, tt.code, got, err, tt.want)
		}
	}
}

func TestMatchLanguage(t *testing.T) {
	t.Parallel()
	for locale, want := range map[string]language.Tag{
		"": language.English, "not a tag!": language.English, "de-AT": language.German, "de-CH": language.German,
		"fr-CH": language.French, "es-MX": language.Spanish, "ja-JP": language.Japanese, "ar-KW": language.Arabic,
		"en-IE": language.English, "pt-BR": language.English, "pl-PL": language.English, "zh-CN": language.English,
	} {
		// Twice: the second answer comes from the cache.
		for range 2 {
			if got := MatchLanguage(locale); got != want {
				t.Errorf("MatchLanguage(%q) = %v, want %v", locale, got, want)
			}
		}
	}
}

// The cache of MatchLanguage stays bounded and right when it starts again.
func TestMatchLanguageCacheBounded(t *testing.T) {
	t.Parallel()
	for i := range maxMatched + 10 {
		locale := fmt.Sprintf("de-x-%d", i)
		if got := MatchLanguage(locale); got != language.German {
			t.Fatalf("MatchLanguage(%q) = %v", locale, got)
		}
	}
	matched.RLock()
	n := len(matched.m)
	matched.RUnlock()
	if n > maxMatched {
		t.Errorf("the cache holds %d locales, more than %d", n, maxMatched)
	}
	if got := MatchLanguage("ja-JP"); got != language.Japanese {
		t.Errorf("MatchLanguage(ja-JP) = %v after the cache started again", got)
	}
}

// Every shipped language translates every message English has.
func TestCatalogComplete(t *testing.T) {
	t.Parallel()
	for _, lang := range Languages {
		have := map[string]bool{}
		for _, tr := range translations[lang] {
			have[tr.id] = true
		}
		for _, tr := range translations[language.English] {
			if !have[tr.id] {
				t.Errorf("%v lacks message %q", lang, tr.id)
			}
		}
	}
}

func TestWeekRangeLocalised(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		lang string
		week string
		want string
	}{
		{"de-DE", "2026-W48", "23.–29. Nov. 2026"},
		{"de-DE", "2026-W49", "30. Nov.\u2009–\u20096. Dez. 2026"},
		{"fr-FR", "2026-W53", "28 déc. 2026\u2009–\u20093 janv. 2027"},
		{"ja-JP", "2026-W48", "2026年11月23日～29日"},
		{"ja-JP", "2026-W49", "2026年11月30日～12月6日"},
		{"ar-EG", "2026-W48", "٢٣–٢٩ نوفمبر ٢٠٢٦"},
		{"ar-AE", "2026-W48", "23–29 نوفمبر 2026"},
		{"en-US", "2026-W48", "Nov 23\u2009–\u200929, 2026"},
		{"en-US", "2026-W53", "Dec 28, 2026\u2009–\u2009Jan 3, 2027"},
		{"es-MX", "2026-W48", "23–29 de nov de 2026"},
	} {
		w, err := ParseISOWeek(tt.week)
		if err != nil {
			t.Fatal(err)
		}
		if got := localeFor(tt.lang).weekRange(w.Start(time.UTC), w.End(time.UTC)); got != tt.want {
			t.Errorf("%v %s = %q, want %q", tt.lang, tt.week, got, tt.want)
		}
	}
}

// A right-to-left digest says so on the HTML, and is escaped like any other.
func TestRenderArabicRTL(t *testing.T) {
	t.Parallel()
	c := Customer{ID: "c1", Email: "a@example.com", Name: "<b>حسن</b>", Locale: "ar-KW"}
	_, out := renderDigest(t, c, time.UTC, row("2026-11-24T03:00:00Z", "card_payment", -1280, "KWD", "x"))
	for _, want := range []string{`<html lang="ar" dir="rtl">`, "&lt;b&gt;حسن&lt;/b&gt;", "دفع بالبطاقة"} {
		if !strings.Contains(out.HTML, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if strings.Contains(out.HTML, "<b>حسن") {
		t.Error("name not escaped")
	}
}

// An amount's minor units are read with x/text's number of decimals, as
// every digest before CLDR 48's tables was (changing it would change what
// an amount_minor means); for every currency cldrgen writes symbols of, it
// is also CLDR 48's (supplemental currencyData).
func TestCurrencyDigitsAgreeWithCLDR(t *testing.T) {
	t.Parallel()
	for code, want := range cldrCurrencyDigits {
		scale, _ := currency.Standard.Rounding(currency.MustParseISO(code))
		if scale != want {
			t.Errorf("%s: x/text has %d decimals, CLDR %s %d", code, scale, cldrVersion, want)
		}
	}
}

// A customer's locale is served by its own CLDR data when shipped, else
// along CLDR's parent locales; a language without region by its own; an
// unshipped language by English.
func TestLocaleFallsBackAlongCLDRParents(t *testing.T) {
	t.Parallel()
	for locale, want := range map[string]string{
		"es-MX": "es-MX", "es-AR": "es-419", "es-419": "es-419", "es-ES": "es", "es": "es",
		"en-US": "en", "en-AU": "en-001", "en-GB": "en-GB", "en-IN": "en-IN", "en": "en",
		"de-CH": "de-CH", "de-LU": "de", "de-AT": "de-AT", "fr-BE": "fr", "fr-CA": "fr-CA",
		"ar-AE": "ar-AE", "ar-MA": "ar", "ar": "ar", "ja-JP": "ja",
		"pt-BR": "en", "pl-PL": "en", "": "en", "not a tag!": "en", "es-mx": "es-MX",
	} {
		if got := localeFor(locale); got.id != want {
			t.Errorf("localeFor(%q) = %s, want %s", locale, got.id, want)
		}
	}
	if w := localeFor("es-AR").words; w != spanishLatinAmerica {
		t.Errorf("es-AR is written with %v words, want es-419's", w)
	}
}
