package sender

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	gomail "github.com/wneessen/go-mail"
	"golang.org/x/net/idna"

	"github.com/weeklydigest/digest/digest"
)

// Headers that carry the key, so a provider can be asked about it later.
const (
	// HeaderKey carries the digest key verbatim.
	HeaderKey = "X-Digest-Key"
	// HeaderMailpitTags carries MailpitTag(key); Mailpit tags the message with it.
	HeaderMailpitTags = "X-Tags"
	// HeaderPostmarkKey is Postmark's metadata field "digest-key".
	HeaderPostmarkKey = "X-PM-Metadata-digest-key"
	// HeaderSendGridAPI is SendGrid's X-SMTPAPI: its unique_args
	// "digest_key" comes back in every event of the Event Webhook.
	HeaderSendGridAPI = "X-SMTPAPI"
	// HeaderMailgunVariables is Mailgun's: its "digest_key" comes back in
	// every event's user-variables.
	HeaderMailgunVariables = "X-Mailgun-Variables"
	// HeaderSESTags is Amazon SES's message tags: "digest-key" comes back
	// in every published event's mail.tags.
	HeaderSESTags = "X-SES-MESSAGE-TAGS"
	// HeaderTest is "1" on a test send (digest.Message.Test).
	HeaderTest = "X-Digest-Test"
	// TestSubjectPrefix starts the subject of a test send.
	TestSubjectPrefix = "[TEST] "
)

// maxAddrLen is the longest address RFC 5321 allows in a path.
const maxAddrLen = 254

// ErrInvalidAddress is wrapped by ValidateAddress's errors.
var ErrInvalidAddress = errors.New("invalid email address")

// ValidateAddress checks that email is a bare RFC 5322 addr-spec
// (local@domain, no display name, no comments) that can go into an SMTP
// command and a header as is: no spaces, no control characters, at most 254
// bytes.
func ValidateAddress(email string) error {
	switch {
	case email == "":
		return fmt.Errorf("%w: empty", ErrInvalidAddress)
	case len(email) > maxAddrLen:
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidAddress, maxAddrLen)
	case strings.ContainsFunc(email, isSpaceOrControl):
		return fmt.Errorf("%w: contains a space or control character", ErrInvalidAddress)
	}
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || a.Name != "" {
		return fmt.Errorf("%w: %q is not local@domain", ErrInvalidAddress, Clip(email))
	}
	at := strings.LastIndexByte(email, '@')
	if at <= 0 || at == len(email)-1 || strings.ContainsAny(email[at+1:], "[]") {
		return fmt.Errorf("%w: %q has no domain", ErrInvalidAddress, Clip(email))
	}
	return nil
}

// asciiDomain returns email with an internationalized domain (bücher.example)
// in its A-label form (xn--bcher-kva.example), as RCPT TO and the To header
// need it on a server without SMTPUTF8 (RFC 5890, IDNA2008 lookup rules);
// an ASCII domain is returned as is. The local part is left alone.
func asciiDomain(email string) (string, error) {
	at := strings.LastIndexByte(email, '@')
	domain := email[at+1:]
	if isASCII(domain) {
		return email, nil
	}
	a, err := idna.Lookup.ToASCII(domain)
	if err != nil {
		return "", fmt.Errorf("%w: the domain is not a valid internationalized domain name", ErrInvalidAddress)
	}
	return email[:at+1] + a, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func isSpaceOrControl(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }

// HeaderText turns a display name or subject into one header line: control
// characters (CR and LF above all) become spaces, so no value can start a
// header of its own, and runs of spaces one. go-mail then RFC 2047-encodes
// what is not plain ASCII. Other spaces are kept: CLDR's U+2009 around a
// range's dash, U+00A0 and U+202F are part of how a locale writes a date.
func HeaderText(s string) string {
	if isHeaderText(s) {
		return s // the usual name or subject: nothing to change, nothing to allocate
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' }), " ")
}

// isHeaderText reports whether HeaderText would return s as it is: no
// control character, line or paragraph separator, and single spaces only
// between words.
func isHeaderText(s string) bool {
	if s == "" {
		return true
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' || strings.Contains(s, "  ") {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return false
		}
	}
	return true
}

// MailpitTag returns the Mailpit tag for key: "dk-" + key id + "-" + hex, in
// lower case. Mailpit tags allow only letters, digits, '-', '_', '.', '@'
// and space, at most 100 characters, and its search lowercases the tag, so
// the ':' of the key must go and a key id of up to 32 characters still fits.
func MailpitTag(key digest.Key) string {
	return "dk-" + strings.ToLower(key.KeyID()) + "-" + key.Hex()
}

// providerKeyHeaders sets, through set, the headers that hand key to
// providers that report it back in their webhooks under a name of their
// own (package webhook reads them): SendGrid's unique_args and Mailgun's
// variables as JSON (written as json.Marshal writes the one-entry maps,
// without building them for every message), and an SES tag, whose value allows only letters, digits, '_' and
// '-' (left out for a key id with '.': the X-Digest-Key header, which SES
// reports too, still carries the key).
func providerKeyHeaders(key digest.Key, set func(name, value string)) {
	arg := `{"digest_key":` + jsonString(string(key)) + `}`
	set(HeaderSendGridAPI, `{"unique_args":`+arg+`}`)
	set(HeaderMailgunVariables, arg)
	if kid := key.KeyID(); !strings.Contains(kid, ".") {
		set(HeaderSESTags, "digest-key="+kid+"_"+key.Hex())
	}
}

// jsonString is s as encoding/json writes a string, quotes included. A key
// is letters, digits and a few marks, which JSON writes as they are, so
// the usual key needs no encoder; anything else goes through json.Marshal,
// HTML-safe escaping and all.
func jsonString(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return string(q)
		}
	}
	return `"` + s + `"`
}

// Envelope is what every message of one mailer shares: the From address
// (whose domain ends every Message-ID) and the fixed List-Unsubscribe
// entry. The Mailer and the file outbox build their messages through it,
// so both send the same bytes for a digest.
type Envelope struct {
	from            mail.Address
	fromDomain      string
	listUnsubscribe string
	sender          string // MAIL FROM's path, "<from>"
	fromLine        string // the From header, as go-mail writes it
}

// NewEnvelope validates from and listUnsubscribe (as in Config).
func NewEnvelope(from digest.Address, listUnsubscribe string) (Envelope, error) {
	if err := ValidateAddress(from.Email); err != nil {
		return Envelope{}, fmt.Errorf("from: %w", err)
	}
	if strings.ContainsFunc(listUnsubscribe, unicode.IsControl) {
		return Envelope{}, errors.New("list-unsubscribe: contains a control character")
	}
	e := Envelope{
		from:            mail.Address{Name: HeaderText(from.Name), Address: from.Email},
		fromDomain:      from.Email[strings.LastIndexByte(from.Email, '@')+1:],
		listUnsubscribe: strings.TrimSpace(listUnsubscribe),
		sender:          (&mail.Address{Address: from.Email}).String(),
	}
	e.fromLine = string(appendHeader(nil, string(gomail.HeaderFrom), e.from.String()))
	return e, nil
}

// HeaderListUnsubscribePost is RFC 8058's one-click header.
const HeaderListUnsubscribePost = "List-Unsubscribe-Post"

// setListUnsubscribe sets List-Unsubscribe: the recipient's own entry
// (its URI in <...>, checked by letter: it cannot end the header or the
// entry) first, then the fixed value of DIGEST_LIST_UNSUBSCRIBE (e.g. a
// mailto:), and, when the recipient's URI is https, RFC 8058's
// "List-Unsubscribe-Post: List-Unsubscribe=One-Click".
func (e Envelope) setListUnsubscribe(l *Letter, entry string, https bool) {
	switch {
	case entry != "" && e.listUnsubscribe != "":
		l.listUnsubscribe = entry + ", " + e.listUnsubscribe
	case entry != "":
		l.listUnsubscribe = entry
	default:
		l.listUnsubscribe = e.listUnsubscribe
	}
	if https {
		l.setHeader(HeaderListUnsubscribePost, "List-Unsubscribe=One-Click")
	}
}

// MessageID returns the Message-ID (without angle brackets) of the message
// for key from a sender at domain: hex@domain, the same on every retry.
func MessageID(key digest.Key, domain string) string { return key.Hex() + "@" + domain }

// permanent wraps err as a permanent send failure.
func permanent(err error) error {
	return &digest.SendError{Class: digest.SendPermanent, Err: err}
}

// Letter turns m into the letter the mailer sends (Letter.Compose). Its
// errors are permanent: the same message will never become valid by
// retrying. The caller returns it with Letter.Release.
//
// Every header of the message is set here, once, for both composers
// (Letter.Compose and go-mail's, goMail): a header more is one setHeader.
func (e Envelope) Letter(m *digest.Message, now time.Time) (*Letter, error) {
	if m == nil {
		return nil, permanent(errors.New("nil message"))
	}
	key, err := digest.ParseKey(string(m.Key))
	if err != nil {
		return nil, permanent(err)
	}
	if err := ValidateAddress(m.To.Email); err != nil {
		return nil, permanent(fmt.Errorf("to: %w", err))
	}
	to, err := asciiDomain(m.To.Email)
	if err != nil {
		return nil, permanent(fmt.Errorf("to: %w", err))
	}
	if m.Text == "" && m.HTML == "" {
		return nil, permanent(errors.New("message has neither text nor HTML"))
	}
	var unsubscribe string
	if m.Unsubscribe != "" {
		if strings.ContainsFunc(m.Unsubscribe, isSpaceOrControl) || strings.ContainsAny(m.Unsubscribe, "<>,") {
			return nil, permanent(errors.New("unsubscribe URI holds white space, a control character or one of < > ,"))
		}
		unsubscribe = "<" + m.Unsubscribe + ">"
	}
	l := getLetter()
	l.sender, l.fromLine = e.sender, e.fromLine
	l.to = mail.Address{Name: HeaderText(m.To.Name), Address: to}
	l.toValue = l.to.String()
	l.rcpts[0] = (&mail.Address{Address: to}).String()
	l.text, l.html = m.Text, m.HTML
	// go-mail would name itself and its version in User-Agent and
	// X-Mailer: it tells a reader which library to aim at, and nobody else
	// anything.
	//
	// The parts go out 8bit, as rendered, when every line fits SMTP's 998
	// bytes (see fits8bit): the smallest and cheapest encoding for the
	// sender, the server and the reader alike (BenchmarkEncoding, the
	// example's digests, CPU per message: 8bit 5941 bytes on the wire,
	// 36 µs to compose, 20 µs to read as DATA, 44 µs to decode;
	// quoted-printable 6815 bytes, 62, 22, 90 µs; base64 7657 bytes, 58,
	// 26, 58 µs). Letter.Compose turns them to quoted-printable for a
	// server without 8BITMIME. The MIME boundary derives from the key, so
	// every attempt of a digest writes the same body bytes.
	l.eightBit = fits8bit(m.Text) && fits8bit(m.HTML)
	subject := HeaderText(m.Subject)
	if m.Test {
		subject = TestSubjectPrefix + subject
		l.setHeader(HeaderTest, "1")
	}
	l.messageID = "<" + MessageID(key, e.fromDomain) + ">"
	l.setHeader(string(gomail.HeaderDate), now.Format(time.RFC1123Z))
	l.setHeader(string(gomail.HeaderMIMEVersion), string(gomail.MIME10))
	l.setHeader(string(gomail.HeaderMessageID), l.messageID)
	l.setHeader(string(gomail.HeaderSubject), subject)
	l.setHeader(HeaderKey, string(key))
	l.setHeader(HeaderMailpitTags, MailpitTag(key))
	l.setHeader(HeaderPostmarkKey, string(key))
	providerKeyHeaders(key, l.setHeader)
	e.setListUnsubscribe(l, unsubscribe, strings.HasPrefix(m.Unsubscribe, "https://"))
	if m.Text != "" && m.HTML != "" {
		if b := boundary(key); !strings.Contains(m.Text, b) && !strings.Contains(m.HTML, b) {
			l.boundary = b
		} else {
			// The boundary is in a part: go-mail composes it, with a
			// random boundary.
			l.msg = e.goMail(l)
		}
	}
	return l, nil
}

// goMail returns the go-mail message for l: the reference composer, and
// the composer of a letter whose boundary occurs in a part.
func (e Envelope) goMail(l *Letter) *gomail.Msg {
	enc := gomail.EncodingQP
	if l.eightBit {
		enc = gomail.NoEncoding
	}
	msg := gomail.NewMsg(gomail.WithNoDefaultUserAgent(), gomail.WithEncoding(enc))
	if l.boundary != "" {
		msg.SetBoundary(l.boundary)
	}
	from, to := e.from, l.to
	msg.FromMailAddress(&from)
	msg.ToMailAddress(&to)
	for _, h := range l.headers {
		msg.SetGenHeader(gomail.Header(h.name), h.value)
	}
	if l.listUnsubscribe != "" {
		msg.SetGenHeaderPreformatted(gomail.HeaderListUnsubscribe, l.listUnsubscribe)
	}
	switch {
	case l.text != "" && l.html != "":
		msg.SetBodyWriter(gomail.TypeTextPlain, writeString(l.text))
		msg.AddAlternativeWriter(gomail.TypeTextHTML, writeString(l.html))
	case l.text != "":
		msg.SetBodyWriter(gomail.TypeTextPlain, writeString(l.text))
	default:
		msg.SetBodyWriter(gomail.TypeTextHTML, writeString(l.html))
	}
	return msg
}

// build turns m into a go-mail message (the letter's, goMail). Its errors
// are permanent.
func (e Envelope) build(m *digest.Message, now time.Time) (*gomail.Msg, error) {
	l, err := e.Letter(m, now)
	if err != nil {
		return nil, err
	}
	defer putLetter(l)
	if l.msg != nil {
		return l.msg, nil
	}
	return e.goMail(l), nil
}

// maxLine is the longest line SMTP carries, CRLF excluded (RFC 5321
// 4.5.3.1.6).
const maxLine = 998

// fits8bit reports whether s can go as an 8bit part (RFC 6152): no line
// longer than maxLine bytes, no NUL and no CR (the rendered parts end
// lines with LF alone, which DATA turns into CRLF). It runs for every
// message on its whole text and HTML, so it scans with IndexByte (which
// looks at many bytes at a time) rather than splitting into lines: a
// per-line split was 4% of the process's CPU in the in-process bench.
func fits8bit(s string) bool {
	if strings.IndexByte(s, 0) >= 0 || strings.IndexByte(s, '\r') >= 0 {
		return false
	}
	for len(s) > maxLine {
		i := strings.IndexByte(s[:maxLine+1], '\n')
		if i < 0 {
			return false
		}
		s = s[i+1:]
	}
	return true
}

// boundary is the MIME boundary of the message for key: the same on every
// attempt, unlike go-mail's random one.
func boundary(key digest.Key) string { return "digest-" + key.Hex()[:32] }

// encodeFor8BitMIME makes msg's 8bit parts quoted-printable unless the
// server advertises 8BITMIME (RFC 6152), and returns the parts it changed.
func encodeFor8BitMIME(msg *gomail.Msg, eightBitMIME bool) []*gomail.Part {
	if eightBitMIME {
		return nil
	}
	var changed []*gomail.Part
	for _, p := range msg.GetParts() {
		if p.GetEncoding() == gomail.NoEncoding {
			p.SetEncoding(gomail.EncodingQP)
			changed = append(changed, p)
		}
	}
	return changed
}

// writeString is a go-mail body writer for s: unlike SetBodyString it
// does not copy s into a buffer first, and it writes the same bytes each
// time the message is written.
func writeString(s string) func(io.Writer) (int64, error) {
	return func(w io.Writer) (int64, error) {
		n, err := io.WriteString(w, s)
		return int64(n), err
	}
}
