// Package doccheck finds references in the project's prose that no longer
// name anything: Go identifiers, test names and file paths quoted in
// docs/*.md, README.md and Go comments, resolved against the module's own
// source. Code moves and names change; a doc that still quotes a function
// by its old name sends its reader to nothing, and no compiler notices.
//
// Two more checks keep prose honest: a section named beside a doc
// (docs/operations.md, "Week state") must be a heading or a bold paragraph
// lead of that doc, and every measurement of docs/benchmarks.md must say
// its date, its machine and load, and the command that takes it again.
//
// It parses every .go file of the module with go/parser (no type
// checking, no build tags: a name declared under any tag counts), so it
// needs nothing but the source tree. Names of other modules (pgx, go-mail,
// the standard library) are not resolved: a qualified name whose package
// is not one of the module's is taken as theirs.
package doccheck
