// Package sqlfile reads named SQL statements from embedded .sql files, in
// the manner of sqlc's query files: each statement follows a line
//
//	-- name: Claim
//
// and runs to the next such line or the end of the file. The comment lines
// right after the name document the statement and are dropped, as is a
// final ';'; the rest is kept as written: there is no templating.
package sqlfile

import (
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

const marker = "-- name:"

// Set is the statements of a store, by name.
type Set map[string]string

// Parse reads every *.sql file at the root of fsys. A name given twice, a
// statement with no text, or text before the first name that is not a
// comment is an error.
func Parse(fsys fs.FS) (Set, error) {
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	set := Set{}
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		if err := set.parse(f, string(data)); err != nil {
			return nil, err
		}
	}
	return set, nil
}

func (s Set) parse(file, text string) error {
	var (
		name string
		body strings.Builder
	)
	flush := func() error {
		if name == "" {
			return nil
		}
		stmt := strings.TrimSuffix(strings.TrimSpace(body.String()), ";")
		if stmt == "" {
			return fmt.Errorf("%s: statement %s is empty", file, name)
		}
		if _, dup := s[name]; dup {
			return fmt.Errorf("%s: statement %s is defined twice", file, name)
		}
		s[name] = stmt
		body.Reset()
		return nil
	}
	for i, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, marker); ok {
			if err := flush(); err != nil {
				return err
			}
			name = strings.TrimSpace(rest)
			if name == "" {
				return fmt.Errorf("%s:%d: a statement without a name", file, i+1)
			}
			continue
		}
		if name == "" {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "--") {
				return fmt.Errorf("%s:%d: SQL before the first %q line", file, i+1, marker)
			}
			continue
		}
		if body.Len() == 0 && strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue // the statement's doc comment
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	return flush()
}

// MustParse is Parse of the directory dir of fsys, for the embedded files
// of a store, read when its package is initialised: a malformed file is a
// programming error.
func MustParse(fsys fs.FS, dir string) Set {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic("sqlfile: " + err.Error())
	}
	s, err := Parse(sub)
	if err != nil {
		panic("sqlfile: " + err.Error())
	}
	return s
}

// Get returns the statement name, and panics when there is none, so that
// a misspelt name fails when the package is initialised, not in a run.
func (s Set) Get(name string) string {
	stmt, ok := s[name]
	if !ok {
		panic("sqlfile: no statement named " + name)
	}
	return stmt
}
