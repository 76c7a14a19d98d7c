// Package ledger is the receipt ledger: the state machine that decides
// whether a digest may be sent. This package holds what every store
// shares: the Store interface and its request and result types, the
// decision rules, the errors and the history texts. The stores are
// packages of their own: ledger/postgres (pgx v5) and ledger/sqlite (an
// embedded file, modernc.org/sqlite); both implement digest.Ledger and
// Store and pass one contract suite.
//
// # State diagram
//
// States × triggers → state, and who may cause each transition. This
// table is the authoritative one (docs/design.md explains it); it is
// Transitions in code, a test keeps the two the same, and the contract
// suite (package ledgertest) walks every state × trigger on each store.
// A pair not listed leaves the receipt as it is, with no history row: a
// claim reports why (busy, not due, already sent, held, failed,
// quarantined, or for an acknowledged receipt already sent or failed), a
// fenced call gets digest.ErrStaleClaim, an operator action ErrWrongState,
// ErrWasSent, ErrNotSent or ErrNotFound.
//
//	from          when           trigger                            to            by                history
//	(none)        -              claim                              claimed       a run             told by the receipt
//	(none)        -              claim with another fingerprint     claimed       a run             told by the receipt
//	claimed       lease expired  claim                              claimed       a run             row
//	retryable     due            claim                              claimed       a run             row
//	claimed       -              start sending                      claimed       the claim holder  told by the receipt
//	claimed       -              renew                              claimed       the claim holder  none
//	claimed       -              finish sent                        sent          the claim holder  told by the receipt
//	claimed       -              finish retryable                   retryable     the claim holder  row
//	claimed       -              finish failed                      failed        the claim holder  row
//	claimed       -              finish held                        held          the claim holder  row
//	claimed       -              claim with another fingerprint     quarantined   a run             row
//	sent          -              claim with another fingerprint     quarantined   a run             row
//	retryable     -              claim with another fingerprint     quarantined   a run             row
//	failed        -              claim with another fingerprint     quarantined   a run             row
//	held          -              claim with another fingerprint     quarantined   a run             row
//	held          -              release                            retryable     an operator       row
//	held          -              mark sent                          sent          an operator       row
//	quarantined   never sent     release                            retryable     an operator       row
//	quarantined   was sent       acknowledge                        acknowledged  an operator       row
//	quarantined   -              acknowledge naming unsent          acknowledged  an operator       row
//	held          -              acknowledge naming unsent          acknowledged  an operator       row
//	sent          not run since  prune                              (none)        an operator       none
//	failed        not run since  prune                              (none)        an operator       none
//	acknowledged  not run since  prune                              (none)        an operator       none
//	sent          not run since  prune naming held and quarantined  (none)        an operator       none
//	failed        not run since  prune naming held and quarantined  (none)        an operator       none
//	acknowledged  not run since  prune naming held and quarantined  (none)        an operator       none
//	held          not run since  prune naming held and quarantined  (none)        an operator       none
//	quarantined   not run since  prune naming held and quarantined  (none)        an operator       none
//	claimed       start expired  prune                              held          an operator       row
//	claimed       lease expired  prune                              failed        an operator       row
//	retryable     maybe sent     prune                              held          an operator       row
//	retryable     -              prune                              failed        an operator       row
//	claimed       start expired  prune naming held and quarantined  held          an operator       row
//	claimed       lease expired  prune naming held and quarantined  failed        an operator       row
//	retryable     maybe sent     prune naming held and quarantined  held          an operator       row
//	retryable     -              prune naming held and quarantined  failed        an operator       row
//	claimed       start expired  end claim no run will send         held          a run             row
//	claimed       lease expired  end claim no run will send         failed        a run             row
//	retryable     maybe sent     end claim no run will send         held          a run             row
//	retryable     -              end claim no run will send         failed        a run             row
//
// "when" narrows the from-state: lease expired (lease_expires_at <= now),
// due (next_attempt_at <= now), never sent (no sent_at), was sent (sent_at
// set), start expired (lease expired after the send started), maybe sent
// (an earlier send may have reached the provider), not run since
// (last updated before the prune's cutoff, in a week no run started since
// the cutoff); "-" is any. "the claim holder" is the run whose token still
// fences the receipt: its lease may have expired, as long as nobody took
// the receipt over. "history" says how the transition enters the
// receipt's history: "row", one history row (receipt_events) appended in
// the same statement or transaction, with the text defined once in this
// package (the History* constants, FinishDetail, Action.Detail,
// MarkSentDetail); "told by the receipt", no row, because the receipt's
// own columns record it (the happy path: first_claimed_at and run_id, or first_run_id, for
// the first claim, send_started_at for the send start, sent_at and
// provider_ref for the finish to sent, which writes a row only when its
// Finish gives a reason), and Show tells the event from them with the same
// text (ReceiptStory, Event.FromReceipt), so an operator still reads
// claimed → send started → sent with times; "none", nothing: a renewal
// only moves the lease on, and a prune removes the history with the
// receipt and leaves a tombstone per pin of the week. A send start that
// replaces an earlier one (a claim taken over or claimed again after its
// send started) writes a row for the earlier start, so no start is lost.
// Takeovers, retries, retryable, failed and held finishes, quarantines,
// releases, mark-sent and acknowledgements all write rows.
//
// # Decisions this package makes
//
// Claim. On PostgreSQL a call is one multi-row INSERT … ON CONFLICT … DO
// UPDATE … WHERE <claimable> statement (one row per request, each decided
// atomically; requests sharing a key go to successive statements of the
// same round trip). On SQLite the same decision runs inside one BEGIN
// IMMEDIATE transaction, which holds the database's write lock. Either way
// exactly one concurrent caller is told OutcomeClaimed. StartSending and
// Finish are likewise one multi-row UPDATE per call, and every statement
// that changes a receipt appends its history rows, where the transition
// has one, in the same statement (PostgreSQL, a data-modifying CTE) or
// transaction (SQLite).
//
// Fencing. Every claim gets a new int64 token. StartSending and Finish
// succeed only while the row is still in state claimed with that token. A
// token whose lease has expired but which nobody has taken over yet still
// holds the row and may finish it: nobody else was given permission to
// send, so its result is the truth. Once another claim takes the row over,
// the old token gets ErrStaleClaim.
//
// MaybeSent. A claim taken over after its lease expired reports MaybeSent
// when the earlier claim had called StartSending, or when the row already
// carried the mark. A retryable Finish keeps the mark only if Finish.MaybeSent
// says so. The mark is cleared only by Finish(retryable, MaybeSent=false) or
// by an operator's Release of a held row.
//
// Rotation. ClaimRequest.Keys lists candidates current first; the first
// candidate that holds a receipt governs, otherwise a new receipt is created
// under Keys[0]. Two runs with different keyrings claiming the same absent
// digest at the same moment would create two receipts: rotate between runs.
//
// Quarantine. A fingerprint that differs from the stored one moves the row
// to quarantined from any state, including sent; the stored fingerprint,
// sent time and provider reference are kept and the new fingerprint is
// stored as the conflict. A quarantined row is never claimable, and a live
// claim on it is void: its holder gets ErrStaleClaim and must not send. Release of a
// quarantined row that was never sent adopts the conflicting fingerprint and
// makes the row retryable (due now), keeping MaybeSent if a send may have
// started; a quarantined row that was sent is never released (ErrWasSent):
// the customer got a different digest, which is for a person to resolve.
//
// Acknowledge. That person closes it with Acknowledge: the receipt becomes
// acknowledged, a final state that keeps both fingerprints, the sent time
// and the provider reference as evidence and the operator's who and why
// in its history. It counts as settled (Counts.Settled), is pruned like a
// sent one, and no claim changes it, whatever its fingerprint: a run
// reports it already sent (or, closed unsent, failed), and never
// quarantines it again. A quarantined receipt that was never sent, or a
// held one (maybe sent), is refused with ErrNotSent, since release is what
// gets the customer their digest; naming unsent closes it knowingly.
//
// Prune removes settled receipts (sent, failed, acknowledged) last updated
// before a cutoff, with their events, and observations recorded before
// it; held and quarantined receipts only when asked. Snapshot pins are never pruned: a backfill must rebuild the
// same digest.
//
// Time comes from the stores' Config.Now; nothing in this package calls
// time.Now for a decision.
//
// # Errors
//
// A request the ledger refuses gets one of its errors (ErrInvalid,
// ErrNotFound, ErrWrongState, ErrWasSent, ErrNotSent), or
// digest.ErrStaleClaim per element; a driver's error leaves a store as a
// DriverError whose ErrorClass says what the caller can do: Conflict (a
// concurrent transaction won; nothing changed; try again), Transient (the
// database could not be reached or was going away; try again later) or
// Fatal (trying again will not help). Each store classifies its own
// driver's codes by name (SQLSTATEs on PostgreSQL, result codes on
// SQLite); ErrorClassOf reads the class of any error a store returned.
package ledger
