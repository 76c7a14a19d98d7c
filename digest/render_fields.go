package digest

// The fields a compiled template (render_program.go) can read, by name: one
// accessor per field, written out so that executing a template reads a
// field with a plain call instead of text/template's reflect.FieldByName
// and boxing. TestFieldTablesComplete checks, with reflect, that every
// field of view, labels, viewRow and viewTotal is here and that each
// accessor reads the field it is named after. A field missing from these
// tables is not an error: the template that prints it is executed by
// text/template instead (see compileTemplate).

// field reads one field of a T: exactly one of its accessors is set, by
// the field's Go type.
type field[T any] struct {
	str  func(*T) string
	num  func(*T) int
	flag func(*T) bool
}

// viewFields are view's printable fields. Rows, Totals and T are not
// values a template prints: the compiler handles them itself.
var viewFields = map[string]field[view]{
	"Subject":     {str: func(v *view) string { return v.Subject }},
	"Lang":        {str: func(v *view) string { return v.Lang }},
	"Dir":         {str: func(v *view) string { return v.Dir }},
	"Start":       {str: func(v *view) string { return v.Start }},
	"End":         {str: func(v *view) string { return v.End }},
	"Week":        {str: func(v *view) string { return v.Week }},
	"Range":       {str: func(v *view) string { return v.Range }},
	"Zone":        {str: func(v *view) string { return v.Zone }},
	"Unsubscribe": {str: func(v *view) string { return v.Unsubscribe }},
	"Greeting":    {str: func(v *view) string { return v.Greeting }},
	"Empty":       {flag: func(v *view) bool { return v.Empty }},
	"Type":        {str: func(v *view) string { return v.Type }},
	"Version":     {str: func(v *view) string { return v.Version }},
}

// labelFields are the fixed words, view.T.
var labelFields = map[string]field[labels]{
	"Subject":          {str: func(l *labels) string { return l.Subject }},
	"Heading":          {str: func(l *labels) string { return l.Heading }},
	"Intro":            {str: func(l *labels) string { return l.Intro }},
	"IntroEmpty":       {str: func(l *labels) string { return l.IntroEmpty }},
	"IntroHTML":        {str: func(l *labels) string { return l.IntroHTML }},
	"EmptyHTML":        {str: func(l *labels) string { return l.EmptyHTML }},
	"Date":             {str: func(l *labels) string { return l.Date }},
	"Activity":         {str: func(l *labels) string { return l.Activity }},
	"Amount":           {str: func(l *labels) string { return l.Amount }},
	"Totals":           {str: func(l *labels) string { return l.Totals }},
	"Currency":         {str: func(l *labels) string { return l.Currency }},
	"MoneyIn":          {str: func(l *labels) string { return l.MoneyIn }},
	"MoneyOut":         {str: func(l *labels) string { return l.MoneyOut }},
	"Net":              {str: func(l *labels) string { return l.Net }},
	"MoneyInPadded":    {str: func(l *labels) string { return l.MoneyInPadded }},
	"MoneyOutPadded":   {str: func(l *labels) string { return l.MoneyOutPadded }},
	"NetPadded":        {str: func(l *labels) string { return l.NetPadded }},
	"Footer":           {str: func(l *labels) string { return l.Footer }},
	"ListSep":          {str: func(l *labels) string { return l.ListSep }},
	"Unsubscribe":      {str: func(l *labels) string { return l.Unsubscribe }},
	"UnsubscribeLabel": {str: func(l *labels) string { return l.UnsubscribeLabel }},
}

var rowFields = map[string]field[viewRow]{
	"Date":         {str: func(r *viewRow) string { return r.Date }},
	"Kind":         {str: func(r *viewRow) string { return r.Kind }},
	"Description":  {str: func(r *viewRow) string { return r.Description }},
	"Amount":       {str: func(r *viewRow) string { return r.Amount }},
	"AmountPadded": {str: func(r *viewRow) string { return r.AmountPadded }},
	"Negative":     {flag: func(r *viewRow) bool { return r.Negative }},
}

var totalFields = map[string]field[viewTotal]{
	"Currency":     {str: func(t *viewTotal) string { return t.Currency }},
	"Count":        {num: func(t *viewTotal) int { return t.Count }},
	"Transactions": {str: func(t *viewTotal) string { return t.Transactions }},
	"Credits":      {str: func(t *viewTotal) string { return t.Credits }},
	"Debits":       {str: func(t *viewTotal) string { return t.Debits }},
	"Net":          {str: func(t *viewTotal) string { return t.Net }},
}
