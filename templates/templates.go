// Package templates holds the email templates of every digest type,
// embedded in the binary with go:embed so that a deployed job never reads
// templates from disk.
//
// Each digest type T has three files:
//
//	T.subject.tmpl  text/template, one line: the subject
//	T.txt.tmpl      text/template: the plain-text part
//	T.html.tmpl     html/template: the HTML part; it may print values in
//	                text, quoted attribute values and <title> only (not in
//	                URLs, scripts or styles: digest.NewRenderer refuses it)
//
// The templates receive already formatted, already sanitised values (see
// digest.Renderer); they only lay them out. Package digest parses them once.
package templates

import "embed"

// FS holds the templates, at the root of the file system.
//
//go:embed *.tmpl
var FS embed.FS

// File names of a digest type's templates.
const (
	SubjectSuffix = ".subject.tmpl"
	TextSuffix    = ".txt.tmpl"
	HTMLSuffix    = ".html.tmpl"
)

// Subject returns the file name of the subject template of digest type typ,
// e.g. Subject("weekly_activity") is "weekly_activity.subject.tmpl".
func Subject(typ string) string { return typ + SubjectSuffix }

// Text returns the file name of the plain-text template of typ.
func Text(typ string) string { return typ + TextSuffix }

// HTML returns the file name of the HTML template of typ.
func HTML(typ string) string { return typ + HTMLSuffix }
