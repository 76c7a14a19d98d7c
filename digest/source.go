package digest

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"iter"
	"slices"
	"time"
)

// Shard selects the customers one pod handles: those with
// ShardOf(id, Count) == Index. Count 0 or 1 means all customers.
type Shard struct {
	Index int
	Count int
}

// All reports whether s selects every customer.
func (s Shard) All() bool { return s.Count <= 1 }

// Has reports whether customer id belongs to s.
func (s Shard) Has(id string) bool { return s.All() || ShardOf(id, s.Count) == s.Index }

func (s Shard) String() string {
	if s.All() {
		return "all"
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// bucket32 is the stable hash shards and cohorts use: the first four bytes of
// MD5 as a big-endian unsigned integer. It is chosen because PostgreSQL can
// compute the same value in SQL:
//
//	('x' || substr(md5(customer_id), 1, 8))::bit(32)::bigint
//
// MD5 is not used for security here, only for a uniform, portable spread.
func bucket32(s string) uint32 {
	sum := md5.Sum([]byte(s))
	return binary.BigEndian.Uint32(sum[:4])
}

// ShardOf returns the shard, 0 to n-1, of customer id among n shards.
func ShardOf(id string, n int) int {
	if n <= 1 {
		return 0
	}
	return int(bucket32(id) % uint32(n))
}

// InCohort reports whether customer id is in the stable pct percent cohort
// (0 to 100) that an enforce rollout covers. The cohort hash is salted so
// that it is independent of the shard.
func InCohort(id string, pct int) bool {
	return int(bucket32("cohort|"+id)%100) < pct
}

// SourceQuery says which records a run reads.
type SourceQuery struct {
	Week     ISOWeek
	Location *time.Location
	// AsOf is the snapshot cutoff: only rows recorded at or before it. A
	// file snapshot is fixed by nature and may ignore it.
	AsOf  time.Time
	Shard Shard
	// Customers, when not nil, restricts the records to these customer ids
	// (sorted ascending, no duplicates): a retry pass reads only the
	// customers whose digests are due again. Ids not in the source are
	// ignored. Nil means every customer of the shard.
	Customers []string
}

// Wants reports whether customer id is selected by q's Shard and Customers.
func (q *SourceQuery) Wants(id string) bool {
	if !q.Shard.Has(id) {
		return false
	}
	if q.Customers == nil {
		return true
	}
	_, found := slices.BinarySearch(q.Customers, id)
	return found
}

// Source streams the customers of a fixed snapshot, in customer id order,
// each with (at least) its activity in the week. It yields one record at a
// time: a run's memory never grows with the number of customers.
//
// A yielded *BadRecordError is a record that could not be read; the rest of
// the stream continues. Any other error ends the stream.
type Source interface {
	Records(ctx context.Context, q SourceQuery) iter.Seq2[Record, error]
}

// Checker is implemented by sources that can validate the whole snapshot
// before anything is sent, so that a malformed snapshot never yields a
// silently partial week.
type Checker interface {
	// Check returns nil or an error listing every bad record.
	Check(ctx context.Context) error
}

// BadRecordError is one record a Source could not read, with where it is.
type BadRecordError struct {
	Where string // e.g. "snapshot.jsonl:17"
	Field string // the offending field, if one is to blame
	Err   error
}

func (e *BadRecordError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %v", e.Where, e.Field, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Where, e.Err)
}

func (e *BadRecordError) Unwrap() error { return e.Err }
