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
	rd, err := s.plan(ctx, q)
	if err != nil {
		return "", nil, err
	}
	loc := q.Location
	if loc == nil {
		loc = time.UTC
	}
	args := append([]any{"", s.pageSize, q.Week.Start(loc), q.Week.End(loc), q.AsOf}, rd.extra...)
	if rd.window > 0 {
		var end string
		if err := s.pool.QueryRow(ctx, windowSQL, "", rd.window).Scan(&end, new(int)); err != nil {
			return "", nil, err
		}
		args[1] = rd.window
		args = append(args, end)
	}
	return rd.sql, args, nil
}
