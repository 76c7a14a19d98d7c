// gen.mjs writes fixture.json: what CLDR, through ICU (Node.js's Intl, an
// implementation independent of digest's cldrgen tables), writes for every
// locale digest ships: amounts (positive, negative, past a million; two-,
// three- and zero-decimal currencies), a row's day (MMMEd) and a week's
// range (yMMMd interval: within a month, across months, across years).
// digest's TestCLDRFixture compares its formats with it byte for byte.
//
//	node digest/testdata/cldr/gen.mjs > digest/testdata/cldr/fixture.json
//
// Node must be ICU-based with full ICU data (Debian's nodejs is); its ICU
// and CLDR versions are recorded in the fixture. Where that ICU's data and
// the CLDR release digest's tables are generated from (cldrgen's
// package.json) disagree, the fixture follows that release and says so in
// `corrections` below, each with its reason.

const locales = [
  'en-US', 'en-GB', 'en-IN', 'de-DE', 'de-AT', 'de-CH', 'fr-FR', 'fr-CA', 'fr-CH',
  'es-ES', 'es-MX', 'ja-JP', 'ar-EG', 'ar-SA', 'ar-AE', 'ar-KW', 'ar-BH',
  // the languages and the parents digest ships (the data other regions fall back to)
  'en', 'en-001', 'de', 'fr', 'es', 'es-419', 'ja', 'ar',
];

// The currency of each region, then those every locale is checked with.
const own = { US: 'USD', GB: 'GBP', IN: 'INR', DE: 'EUR', AT: 'EUR', CH: 'CHF', FR: 'EUR', CA: 'CAD', ES: 'EUR', MX: 'MXN', JP: 'JPY', EG: 'EGP', SA: 'SAR', AE: 'AED', KW: 'KWD', BH: 'BHD' };
const common = ['EUR', 'USD', 'JPY', 'KWD', 'BHD'];
const amounts = [0n, 123456n, -123456n, 123456789n, -123456789n, 5n, -1234567890n];

// Days of 2026-W48 and a January day; weeks: 2026-W48 (one month),
// 2026-W49 (November to December), 2026-W53 (2026 to 2027).
const days = ['2026-11-23', '2026-11-24', '2026-11-25', '2026-11-26', '2026-11-27', '2026-11-28', '2026-11-29', '2027-01-05'];
const ranges = [['2026-11-23', '2026-11-29'], ['2026-11-30', '2026-12-06'], ['2026-12-28', '2027-01-03']];

// corrections: where ICU (CLDR 48.0 in ICU 78) and CLDR 48.2 disagree.
const corrections = [
  {
    // CLDR 48.1 changed fr-CH's grouping separator from U+202F to an
    // apostrophe (as de-CH writes it); ICU 78 carries CLDR 48.0.
    locales: ['fr-CH'], kind: 'money',
    reason: "CLDR 48.2 fr-CH group is ' (48.0, in ICU 78: U+202F)",
    fix: (s) => s.replaceAll('\u202f', "'"),
  },
  {
    locales: ['ja-JP', 'ja'], kind: 'range',
    reason: 'ICU 78 writes ja yMMMd intervals as y/MM/dd～y/MM/dd; CLDR 48 has y年M月d日～d日 (see jaRange)',
    fix: (s) => s,
  },
];

// jaRange: ICU 78 writes every ja yMMMd interval as y/MM/dd～y/MM/dd
// (whatever the month width asked), where CLDR 48's ja intervalFormats
// yMMMd are "y年M月d日～d日", "y年M月d日～M月d日" and "y年M月d日～y年M月d日".
// ICU's own yMMMd date ("2026年11月23日", which is CLDR's) is written for
// the start, then the end's parts from its greatest difference on, after
// CLDR's "～".
function jaRange(f, a, b) {
  const from = a.getUTCFullYear() !== b.getUTCFullYear() ? 'year' : a.getUTCMonth() !== b.getUTCMonth() ? 'month' : 'day';
  const parts = f.formatToParts(b);
  const i = parts.findIndex((p) => p.type === from);
  return f.format(a) + '～' + parts.slice(i).map((p) => p.value).join('');
}

function decimal(minor, digits) {
  const neg = minor < 0n;
  let s = (neg ? -minor : minor).toString().padStart(digits + 1, '0');
  if (digits > 0) s = s.slice(0, s.length - digits) + '.' + s.slice(s.length - digits);
  return (neg ? '-' : '') + s;
}

function fix(locale, kind, s) {
  for (const c of corrections) {
    if (c.locales.includes(locale) && c.kind === kind) s = c.fix(s);
  }
  return s;
}

const at = (d) => new Date(d + 'T12:00:00Z');
const cases = [];
for (const locale of locales) {
  const region = locale.split('-')[1];
  const codes = [...new Set([own[region], ...common].filter(Boolean))];
  for (const code of codes) {
    const nf = new Intl.NumberFormat(locale, { style: 'currency', currency: code });
    const digits = nf.resolvedOptions().maximumFractionDigits;
    for (const minor of amounts) {
      cases.push({ locale, kind: 'money', currency: code, minor: Number(minor), want: fix(locale, 'money', nf.format(decimal(minor, digits))) });
    }
  }
  const day = new Intl.DateTimeFormat(locale, { weekday: 'short', month: 'short', day: 'numeric', timeZone: 'UTC' });
  for (const d of days) cases.push({ locale, kind: 'day', from: d, want: fix(locale, 'day', day.format(at(d))) });
  const rng = new Intl.DateTimeFormat(locale, { year: 'numeric', month: 'short', day: 'numeric', timeZone: 'UTC' });
  for (const [a, b] of ranges) {
    const want = locale.startsWith('ja') ? jaRange(rng, at(a), at(b)) : rng.formatRange(at(a), at(b));
    cases.push({ locale, kind: 'range', from: a, to: b, want: fix(locale, 'range', want) });
  }
}

const out = {
  generator: 'digest/testdata/cldr/gen.mjs',
  node: process.versions.node,
  icu: process.versions.icu,
  cldr: process.versions.cldr,
  corrections: corrections.map((c) => ({ locales: c.locales, kind: c.kind, reason: c.reason })),
  cases,
};
process.stdout.write(JSON.stringify(out, null, 1) + '\n');
