package snapshot

import (
	"context"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// LoadWithoutAnalyze is Seed without its final ANALYZE: the tables as an
// operator's would be between a bulk load and autovacuum's first visit.
var LoadWithoutAnalyze = load

// FirstPage returns the page statement and arguments of the first page
// Records reads for q.
func (s *Postgres) FirstPage(ctx context.Context, q digest.SourceQuery) (string, []any, error) {
	query, err := s.pageQuery(ctx)
	if err != nil {
		return "", nil, err
	}
	loc := q.Location
	if loc == nil {
		loc = time.UTC
	}
	return query, s.pageArgs("", q.Week.Start(loc), q.Week.End(loc), q), nil
}
