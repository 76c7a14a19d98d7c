package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/internal/rules"
)

// claimSQL (sql/claim.sql) decides a set of ClaimRequests in one
// statement, one row each: a single request is a set of one, so that one
// statement, written once, makes every claim decision.
// No two requests of one statement share a candidate key (see rounds).
// Its arguments are named (claimArgs). The lease ends, and an expired one
// is taken over, by the server's now(): the caller's clock decides nothing
// (see ledger.CallTimes).
//
// It relies on two PostgreSQL behaviours:
//   - INSERT … ON CONFLICT DO UPDATE takes the row lock of the conflicting
//     row and evaluates SET and WHERE against its latest committed version,
//     even one committed after this statement's snapshot. Of two concurrent
//     claims of an absent key, the second waits for the first to commit and
//     then sees its live lease, so exactly one wins.
//   - In DO UPDATE SET, r.* are the values before the update, so
//     previous_state = r.state records where the transition came from.
//
// It returns, per request (idx, 1-based), the claimed or quarantined row
// (changed = true), or else the row as of the statement's snapshot
// (changed = false), or nothing when the receipt was inserted concurrently
// after that snapshot. Rows are inserted in key order, so two statements
// lock shared keys in the same order.
var (
	claimSQL = queries.Get("Claim")
	readSQL  = queries.Get("ReadGoverning")
)

// claimArgs are claimSQL's arguments for reqs, all of week, with the
// stand-in for the ledger's clock (Store.clockArg).
func claimArgs(reqs []digest.ClaimRequest, week string, clock *time.Time) pgx.StrictNamedArgs {
	cands, fps, parts, runs, leases := make([]string, len(reqs)), make([]string, len(reqs)), make([]string, len(reqs)),
		make([]string, len(reqs)), make([]int64, len(reqs))
	types, versions := make([]string, len(reqs)), make([]string, len(reqs))
	for i, r := range reqs {
		cands[i] = strings.Join(rules.KeyStrings(r.Keys), ",")
		fps[i], parts[i], runs[i], leases[i] = r.Fingerprint, r.Parts, r.RunID, rules.Micros(r.Lease)
		types[i], versions[i] = r.Type, r.Version
	}
	return pgx.StrictNamedArgs{
		"candidates": cands, "fingerprints": fps, "parts": parts, "run_ids": runs, "leases": leases,
		"types": types, "versions": versions,
		"week": week, "clock": clock,
		"quarantined": ledger.HistoryQuarantined, "claimed": ledger.HistoryClaimed,
		"taken_over": ledger.HistoryTakenOver, "claimed_again": ledger.HistoryClaimedAgain,
		"maybe_sent": ledger.HistoryMaybeSent, "parts_unknown": ledger.HistoryPartsUnknown,
		"parts_changed": ledger.HistoryPartsChanged, "parts_other": ledger.HistoryPartsOther,
	}
}

// scanStored scans the columns claimSQL and readSQL return; at is
// the ledger's time of the statement.
func scanStored(row pgx.Row) (c *rules.Stored, idx int, changed bool, at time.Time, err error) {
	var (
		state, key          string
		lease, next, sentAt *time.Time
		ref                 *string
	)
	c = &rules.Stored{}
	err = row.Scan(&idx, &changed, &key, &state, &c.Fingerprint, &c.Attempts, &c.Token,
		&lease, &next, &sentAt, &ref, &c.MaybeSent, &c.TakenOver, &at)
	if err != nil {
		return nil, 0, false, time.Time{}, err
	}
	c.Key, c.State = digest.Key(key), digest.State(state)
	c.LeaseExpires, c.NextAttempt, c.SentAt = timeOrZero(lease), timeOrZero(next), timeOrZero(sentAt)
	c.ProviderRef = stringOrEmpty(ref)
	return c, idx, changed, at.UTC(), nil
}

// Claim decides all requests in one round trip and one implicit
// transaction: one multi-row statement per round (see rounds), usually one.
func (s *Store) Claim(ctx context.Context, reqs []digest.ClaimRequest) (_ []digest.ClaimResult, err error) {
	defer classify(&err)
	if err := rules.ValidateClaims(reqs); err != nil {
		return nil, err
	}
	asked, clock := s.nowUTC(), s.clockArg()
	res := make([]digest.ClaimResult, len(reqs))
	decided := make([]bool, len(reqs))
	stmts := weekRounds(len(reqs), func(i int) string { return reqs[i].Week.String() },
		func(i int) []digest.Key { return reqs[i].Keys })
	build := func() *pgx.Batch {
		b := &pgx.Batch{}
		for _, st := range stmts {
			round := make([]digest.ClaimRequest, len(st.idx))
			for j, i := range st.idx {
				round[j] = reqs[i]
			}
			b.Queue(claimSQL, claimArgs(round, st.week, clock))
		}
		return b
	}
	read := func(br pgx.BatchResults) error {
		clear(decided)
		for _, st := range stmts {
			round := st.idx
			rows, err := br.Query()
			if err != nil {
				return fmt.Errorf("claim: %w", err)
			}
			for rows.Next() {
				c, idx, changed, at, err := scanStored(rows)
				if err != nil {
					rows.Close()
					return fmt.Errorf("claim: %w", err)
				}
				i := round[idx-1]
				decided[i] = true
				times := ledger.CallTimes{Ledger: at, Caller: asked}
				if changed && c.State == digest.StateClaimed {
					res[i] = times.Result(rules.Claimed(c, at))
				} else {
					res[i] = times.Result(rules.Unclaimed(c, reqs[i].Fingerprint, at))
				}
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("claim: %w", err)
			}
		}
		return nil
	}
	if err := s.sendBatch(ctx, plansFor(len(reqs)), build, read); err != nil {
		return nil, err
	}
	var missing []int // receipts inserted by others after a statement's snapshot
	for i, ok := range decided {
		if !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		if err := s.readMissing(ctx, reqs, missing, res, asked); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// readMissing reports receipts that a concurrent transaction inserted after
// the claim statement's snapshot: the claim lost, so this is never Claimed.
func (s *Store) readMissing(ctx context.Context, reqs []digest.ClaimRequest, missing []int, res []digest.ClaimResult, asked time.Time) error {
	b := &pgx.Batch{}
	for _, i := range missing {
		b.Queue(readSQL, pgx.StrictNamedArgs{
			"candidates": rules.KeyStrings(reqs[i].Keys), "week": reqs[i].Week.String(), "clock": s.clockArg(),
		})
	}
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	for _, i := range missing {
		c, _, _, at, err := scanStored(br.QueryRow())
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			// Gone again (pruned in between): report busy; the next run decides.
			res[i] = digest.ClaimResult{Outcome: digest.OutcomeBusy, Key: reqs[i].Keys[0]}
		case err != nil:
			return fmt.Errorf("claim %s: read: %w", reqs[i].Keys[0], err)
		default:
			res[i] = ledger.CallTimes{Ledger: at, Caller: asked}.Result(rules.Unclaimed(c, reqs[i].Fingerprint, at))
		}
	}
	return br.Close()
}
