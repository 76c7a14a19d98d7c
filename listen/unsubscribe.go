package listen

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"mime"
	"net/http"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// Source is the source of the suppressions this endpoint records.
const Source = "one-click"

// unsubscribePage shows the page with the button: it reads nothing but
// the token (to refuse a bad link) and writes nothing, since link
// scanners and previews GET every URL of a message.
func (s *Service) unsubscribePage(w http.ResponseWriter, r *http.Request) {
	lang := pageLanguage(r)
	tok, ok := s.cfg.Route.Token(r.URL.EscapedPath())
	if ok {
		_, err := s.cfg.Tokens.Verify(tok)
		ok = err == nil
	}
	v := newPageView(lang)
	if !ok {
		s.writePage(w, http.StatusNotFound, v)
		return
	}
	v.Form = true
	s.writePage(w, http.StatusOK, v)
}

// unsubscribePost records the suppression of the token's customer (RFC
// 8058): the form must say List-Unsubscribe=One-Click, in either form
// encoding, within MaxBody bytes; the answer is 200 only once the ledger
// holds the suppression, whether this request added it or an earlier one.
func (s *Service) unsubscribePost(w http.ResponseWriter, r *http.Request) {
	lang := pageLanguage(r)
	refuse := func(code int, why string) {
		s.cfg.Metrics.ObserveUnsubscribe("invalid")
		s.cfg.Logger.Info("unsubscribe refused", "why", why, "status", code)
		s.writeText(w, code, why)
	}
	tok, ok := s.cfg.Route.Token(r.URL.EscapedPath())
	if !ok {
		refuse(http.StatusNotFound, "not an unsubscribe link")
		return
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (mt != "application/x-www-form-urlencoded" && mt != "multipart/form-data") {
		refuse(http.StatusUnsupportedMediaType, "want application/x-www-form-urlencoded or multipart/form-data")
		return
	}
	if r.ContentLength > s.cfg.MaxBody {
		refuse(http.StatusRequestEntityTooLarge, "body too large")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
	if mt == "multipart/form-data" {
		err = r.ParseMultipartForm(s.cfg.MaxBody)
	} else {
		err = r.ParseForm()
	}
	if err != nil {
		if _, big := errors.AsType[*http.MaxBytesError](err); big {
			refuse(http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		refuse(http.StatusBadRequest, "malformed form")
		return
	}
	if r.MultipartForm != nil {
		defer r.MultipartForm.RemoveAll()
	}
	if v := r.PostForm["List-Unsubscribe"]; len(v) != 1 || v[0] != "One-Click" {
		refuse(http.StatusBadRequest, "want the body List-Unsubscribe=One-Click")
		return
	}
	id, err := s.cfg.Tokens.Verify(tok)
	if err != nil {
		s.cfg.Metrics.ObserveUnsubscribe("invalid")
		s.cfg.Logger.Info("unsubscribe refused", "why", "invalid token", "status", http.StatusNotFound)
		s.writePage(w, http.StatusNotFound, newPageView(lang))
		return
	}
	keys := s.cfg.Keys.CustomerKeys(id)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.LedgerTimeout)
	defer cancel()
	added, err := s.cfg.Ledger.Suppress(ctx, ledger.Suppression{Keys: keys, Subject: digest.SubjectCustomer, Reason: digest.ReasonUnsubscribe, Source: Source})
	if err != nil {
		s.cfg.Metrics.ObserveUnsubscribe("error")
		s.cfg.Logger.Error("unsubscribe not recorded: the ledger failed", "customer_key", string(keys[0]), "err", err)
		w.Header().Set("Retry-After", "60")
		s.writeText(w, http.StatusServiceUnavailable, "not recorded, try again later")
		return
	}
	result := "already"
	if added {
		result = "added"
	}
	s.cfg.Metrics.ObserveUnsubscribe(result)
	s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "unsubscribed", slog.String("customer_key", string(keys[0])), slog.Bool("added", added))
	v := newPageView(lang)
	v.Done = true
	s.writePage(w, http.StatusOK, v)
}

// pageHeaders: no caching (the page is per recipient), no referrer (the
// URL holds the token), no framing, no script, forms only to ourselves.
func pageHeaders(h http.Header) {
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
}

func (s *Service) writePage(w http.ResponseWriter, code int, v pageView) {
	var b bytes.Buffer
	if err := page.Execute(&b, v); err != nil {
		s.cfg.Logger.Error("page not rendered", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	pageHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Language", v.Lang)
	w.WriteHeader(code)
	w.Write(b.Bytes())
}

// writeText answers a request a mail client made (or a malformed one)
// in plain text.
func (s *Service) writeText(w http.ResponseWriter, code int, msg string) {
	pageHeaders(w.Header())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	w.Write([]byte(msg + "\n"))
}
