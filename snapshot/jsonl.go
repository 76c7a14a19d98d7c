// Package snapshot holds the fixed-snapshot sources of digest.Source: JSON
// Lines files (this file) and PostgreSQL relations pinned by as_of.
package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"

	"github.com/weeklydigest/digest/digest"
)

// MaxLineLen bounds one line of a JSON Lines snapshot, in bytes, newline
// included. It is also the size of the read buffer: reading a file takes
// this much memory however large the file is.
const MaxLineLen = 1 << 20

// MaxListed bounds how many bad lines a CheckError lists.
const MaxListed = 20

// File is a JSON Lines snapshot: one customer per line, with its activity.
//
//	{"customer_id":"c1","email":"a@example.com","name":"Zoë","locale":"en-GB",
//	 "activity":[{"occurred_at":"2026-11-23T09:15:00Z","recorded_at":"2026-11-23T09:15:02Z",
//	              "kind":"card_payment","amount_minor":-450,"currency":"EUR","description":"Café"}]}
//
// (one line in the file). The format is strict; each of these makes the
// line bad, with an error naming the file, the line and the field:
//
//   - a field not listed here, or a field given twice;
//   - a missing required field: customer_id, email, and in each activity
//     occurred_at, recorded_at, kind, amount_minor and currency; name,
//     locale, description and activity may be absent, and name, locale and
//     description may be "" (absent and "" mean the same); null is never
//     allowed, except for unsubscribed_at;
//   - an unsubscribed_at (optional: absent or null for a subscribed
//     customer) that is not an RFC 3339 timestamp; a customer with one is
//     suppressed: counted, never sent;
//   - a value of the wrong JSON type;
//   - a customer_id that is not a valid digest.Identity field, an email
//     that is not a bare address, a locale that is not a BCP 47-shaped tag,
//     a kind that is not snake_case (a-z, 0-9, '_');
//   - a timestamp that is not RFC 3339 with a zone offset;
//   - a currency that is not an ISO 4217 code in upper case;
//   - an amount_minor that is not a JSON integer (1.5, 1e3 and "12" are
//     rejected) or does not fit in 64 bits;
//   - a customer_id not greater than the one of the line before (see
//     below), which also catches duplicates;
//   - a line longer than MaxLineLen.
//
// Lines are read in file order and customers yielded in that order. The
// file must be sorted by customer_id in ascending byte order (LC_ALL=C
// sort order): digest.Source promises customer id order, and it lets a
// duplicate customer be found in constant memory. Blank lines are ignored.
//
// File is fixed by nature: it ignores SourceQuery.AsOf. It yields every
// activity row of a customer; digest.Build keeps the week's.
type File struct {
	path    string
	maxLine int
}

var (
	_ digest.Source  = (*File)(nil)
	_ digest.Checker = (*File)(nil)
)

// OpenFile returns the snapshot in the file at path, after checking that
// it is a regular file that can be opened for reading. The file is opened
// again by every Records and Check call.
func OpenFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("snapshot: %s is not a regular file", path)
	}
	return &File{path: path, maxLine: MaxLineLen}, nil
}

// Path returns the path the snapshot was opened with.
func (f *File) Path() string { return f.path }

// Records streams the customers of the file that belong to q.Shard (and to
// q.Customers, when given: the scan then ends past the last of them once
// each has been read, or read as a bad line; in a file that is not sorted
// a named customer past that point is read on to, and its line reports the
// disorder instead of the customer going missing). A
// bad line is yielded as a *digest.BadRecordError and the stream goes on; a
// bad line whose customer_id could not be read is yielded by every shard,
// since no shard can tell it is not its own, but not to a query for named
// customers. Any other error (the file cannot be
// read, ctx is done) ends the stream.
func (f *File) Records(ctx context.Context, q digest.SourceQuery) iter.Seq2[digest.Record, error] {
	return func(yield func(digest.Record, error) bool) {
		fh, err := os.Open(f.path)
		if err != nil {
			yield(digest.Record{}, fmt.Errorf("snapshot: %w", err))
			return
		}
		defer fh.Close()
		last := ""
		var unread map[string]bool // the named customers not read yet
		if n := len(q.Customers); n > 0 {
			last = q.Customers[n-1]
			unread = make(map[string]bool, n)
			for _, id := range q.Customers {
				if q.Shard.Has(id) {
					unread[id] = true
				}
			}
		}
		for rec, err := range f.scan(ctx, fh) {
			if err != nil {
				if bad, ok := errors.AsType[*lineError](err); ok {
					if bad.customer != "" && !q.Wants(bad.customer) || bad.customer == "" && q.Customers != nil {
						continue
					}
					delete(unread, bad.customer)
					err = bad.BadRecordError
				}
				if !yield(digest.Record{}, err) {
					return
				}
				continue
			}
			if q.Customers != nil && rec.Customer.ID > last && len(unread) == 0 {
				return // every named customer is read
			}
			delete(unread, rec.Customer.ID)
			if q.Wants(rec.Customer.ID) && !yield(rec, nil) {
				return
			}
		}
	}
}

// Check reads the whole file and returns nil, or a *CheckError listing the
// bad lines, or the error that stopped the reading.
func (f *File) Check(ctx context.Context) error {
	fh, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer fh.Close()
	ce := &CheckError{Path: f.path}
	for _, err := range f.scan(ctx, fh) {
		if err == nil {
			continue
		}
		bad, ok := errors.AsType[*lineError](err)
		if !ok {
			return err
		}
		ce.Total++
		if len(ce.Bad) < MaxListed {
			ce.Bad = append(ce.Bad, bad.BadRecordError)
		}
	}
	if ce.Total > 0 {
		return ce
	}
	return nil
}

// CheckError lists the bad lines of a snapshot: the first MaxListed of
// them, and how many there are in all. errors.As finds each listed
// *digest.BadRecordError in it.
type CheckError struct {
	Path  string
	Bad   []*digest.BadRecordError
	Total int
}

func (e *CheckError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "snapshot %s: %d bad line", e.Path, e.Total)
	if e.Total != 1 {
		b.WriteByte('s')
	}
	for _, bad := range e.Bad {
		b.WriteString("\n  ")
		b.WriteString(bad.Error())
	}
	if n := e.Total - len(e.Bad); n > 0 {
		fmt.Fprintf(&b, "\n  and %d more", n)
	}
	return b.String()
}

// Unwrap returns the listed bad lines.
func (e *CheckError) Unwrap() []error {
	errs := make([]error, len(e.Bad))
	for i, b := range e.Bad {
		errs[i] = b
	}
	return errs
}

// lineError is a bad line with the customer it belongs to, when that much
// could be read, so that Records can leave other shards' lines alone.
type lineError struct {
	*digest.BadRecordError
	customer string
}

func (e *lineError) Unwrap() error { return e.BadRecordError }

// scan reads r line by line with a buffer of f.maxLine bytes and parses
// each line. Bad lines come as *lineError and the scan goes on; a read
// error or ctx ending stops it.
func (f *File) scan(ctx context.Context, r io.Reader) iter.Seq2[digest.Record, error] {
	return func(yield func(digest.Record, error) bool) {
		br := bufio.NewReaderSize(r, f.maxLine)
		var prev string // the last customer_id read in order
		for n := 1; ; n++ {
			if err := ctx.Err(); err != nil {
				yield(digest.Record{}, err)
				return
			}
			line, err := br.ReadSlice('\n')
			where := fmt.Sprintf("%s:%d", f.path, n)
			if errors.Is(err, bufio.ErrBufferFull) {
				if err = skipLine(br); err != nil && err != io.EOF {
					yield(digest.Record{}, fmt.Errorf("snapshot %s: %w", where, err))
					return
				}
				bad := &digest.BadRecordError{Where: where, Err: fmt.Errorf("line longer than %d bytes", f.maxLine)}
				if !yield(digest.Record{}, &lineError{BadRecordError: bad}) || err == io.EOF {
					return
				}
				continue
			}
			if err != nil && err != io.EOF {
				yield(digest.Record{}, fmt.Errorf("snapshot %s: %w", where, err))
				return
			}
			eof := err == io.EOF
			if len(bytes.TrimSpace(line)) > 0 {
				rec, perr := parseLine(line)
				id := rec.Customer.ID
				if id != "" { // read and valid, whatever else is wrong
					if id > prev {
						prev = id
					} else if perr == nil {
						perr = orderError(id, prev)
					}
				}
				if perr != nil {
					bad := &digest.BadRecordError{Where: where, Field: perr.field, Err: perr.err}
					rec, err = digest.Record{}, &lineError{BadRecordError: bad, customer: id}
				} else {
					err = nil
				}
				if !yield(rec, err) {
					return
				}
			}
			if eof {
				return
			}
		}
	}
}

func orderError(id, prev string) *fieldError {
	if id == prev {
		return &fieldError{"customer_id", fmt.Errorf("duplicate customer %q", id)}
	}
	return &fieldError{"customer_id", fmt.Errorf("%q comes after %q: the file must be sorted by customer_id", id, prev)}
}

// skipLine discards the rest of an over-long line.
func skipLine(br *bufio.Reader) error {
	for {
		_, err := br.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}
