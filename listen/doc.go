// Package listen is the HTTP service of "digest serve", through which the
// outside world talks back to the job: the one-click unsubscribe endpoint
// (RFC 8058, receiver side) behind DIGEST_UNSUBSCRIBE_URL, and health,
// readiness and Prometheus metrics for Kubernetes, and the mail
// providers' event webhooks. It shares the ledger database with the runs
// and writes only to its suppression list and its provider events.
//
// The unsubscribe URL https://host/PREFIX/{token} answers two methods:
//
//   - POST with the form field List-Unsubscribe=One-Click (the body a mail
//     client sends for RFC 8058, or the page's button) verifies the token
//     (package unsubscribe) and records the customer's suppression,
//     reason unsubscribe, source one-click: durably before it answers 200,
//     idempotently (200 again for a token already used, one suppression).
//     No cookie, no authentication, no redirect. A bad token, a wrong
//     content type or an oversized body is a 4xx and records nothing.
//   - GET shows a small page in the recipient's language (the token names
//     only the customer, so the language comes from Accept-Language
//     matched against the digest's languages) with one button that POSTs
//     the same form: it works without JavaScript. A GET never unsubscribes
//     and never touches the ledger: link scanners prefetch.
//
// The webhooks, POST /webhooks/{provider} for each configured
// webhook.Provider, take what the providers report: the body (at most
// MaxWebhookBody) goes to the provider's Parse, which verifies its
// signature and reads its events; a forged request is 401, a content type
// it does not take 415, a payload it cannot read or a malformed event 400,
// an unknown provider 404, and none of them records anything. Then every
// event that names a digest key or an address is recorded in the ledger
// (ledger.ProviderEvents: the address only as its HMAC), one transaction
// each, which also suppresses the address for a hard bounce, a complaint,
// the provider's unsubscribe or a streak of soft bounces. The answer is
// 200 once every event is committed; a ledger failure is 503 with
// Retry-After, and the provider's retry finds the events recorded before
// it as replays. Events of other kinds (opens, clicks) and replays are
// counted, not stored.
//
// Every unsubscribe request passes a per-client rate limit and a body size
// limit; the server sets a timeout on every read and write. Logs are JSON
// lines with the route's pattern, never the token or an address; the
// customer is named by its suppression key (an HMAC).
package listen
