package sender

import (
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"slices"
	"strings"
	"sync"

	gomail "github.com/wneessen/go-mail"
)

// Letter is one digest ready to go: its envelope, its headers and its
// parts, composed into the content of DATA or BDAT by Compose, for
// the extensions of the server it goes to, without a go-mail Msg.
//
// The bytes are go-mail's own: Msg.WriteTo of the Msg that build makes
// for the same digest writes exactly them (TestLetterIsGoMails,
// FuzzLetterIsGoMails). go-mail stays the reference composer, and the
// composer when the MIME boundary occurs in a part (then msg is set and
// the letter is only its envelope).
type Letter struct {
	sender string    // MAIL FROM's path: "<from>"
	rcpts  [1]string // RCPT TO's paths: "<to>"
	// messageID is the Message-ID header's value, "<hex@domain>", the
	// reference when the server says nothing after accepting.
	messageID string
	// headers are the generic headers, each with its value before RFC
	// 2047 encoding; written sorted by name, as go-mail writes them.
	headers []header
	// listUnsubscribe is the List-Unsubscribe value as is, "" for none
	// (go-mail's one preformatted header, after the generic ones).
	listUnsubscribe string
	fromLine        string // the whole From header, folded, CRLF included: the same for every letter of an Envelope
	to              mail.Address
	toValue         string // the To header's value: to in net/mail's form
	text, html      string
	eightBit        bool   // the parts go 8bit where the server has 8BITMIME (fits8bit)
	boundary        string // of multipart/alternative, when there are two parts
	msg             *gomail.Msg

	headerSpace [12]header // headers' backing array: no allocation for the usual few
}

// header is one generic header field.
type header struct{ name, value string }

// setHeader adds a generic header, encoded as go-mail's SetGenHeader
// encodes it (RFC 2047 Q-encoding of what is not printable ASCII) when the
// letter is composed. A header of the same name replaces the one set
// before, as in go-mail. Not for Content-Type, Content-Transfer-Encoding,
// From, To or List-Unsubscribe: the composer writes those itself.
func (l *Letter) setHeader(name, value string) {
	for i := range l.headers {
		if l.headers[i].name == name {
			l.headers[i].value = value
			return
		}
	}
	l.headers = append(l.headers, header{name, value})
}

var letters = sync.Pool{New: func() any { return new(Letter) }}

// getLetter returns an empty letter from the pool; putLetter returns it.
func getLetter() *Letter {
	l := letters.Get().(*Letter)
	*l = Letter{}
	l.headers = l.headerSpace[:0]
	return l
}

func putLetter(l *Letter) {
	*l = Letter{}
	letters.Put(l)
}

// The fixed parts of go-mail's MIME structure for the parts a digest has
// (msgWriter.writePart, multipart.Writer): the part headers of each
// encoding, sorted as multipart writes them.
const (
	charsetUTF8 = string(gomail.CharsetUTF8)
	textPlain   = "Content-Type: " + string(gomail.TypeTextPlain) + "; charset=" + charsetUTF8 + "\r\n"
	textHTML    = "Content-Type: " + string(gomail.TypeTextHTML) + "; charset=" + charsetUTF8 + "\r\n"
	enc8bit     = "Content-Transfer-Encoding: " + string(gomail.NoEncoding) + "\r\n"
	encQP       = "Content-Transfer-Encoding: " + string(gomail.EncodingQP) + "\r\n"
)

// Compose writes l into d, for a server that does or does not take 8bit
// parts (8BITMIME): the lines of the message as go-mail writes them, the
// 8bit parts' ending in LF alone. The adapter's d frames them for its
// transport (SMTP's turns every line end into CRLF and dot-stuffs for
// DATA). The letter is left as it was, for another attempt.
func (l *Letter) Compose(d ContentWriter, eightBitMIME bool) error {
	if l.msg != nil {
		return writeGoMail(d, l.msg, eightBitMIME)
	}
	head := getHeadBuffer() // the header, built then written through d at once
	defer putHeadBuffer(head)
	h := head.b
	slices.SortFunc(l.headers, func(a, b header) int { return strings.Compare(a.name, b.name) })
	for _, f := range l.headers {
		h = appendHeader(h, f.name, mime.QEncoding.Encode(charsetUTF8, f.value))
	}
	if l.listUnsubscribe != "" {
		h = append(h, gomail.HeaderListUnsubscribe+": "...)
		h = append(h, l.listUnsubscribe...)
		h = append(h, "\r\n"...)
	}
	h = append(h, l.fromLine...)
	h = appendHeader(h, string(gomail.HeaderTo), l.toValue)
	enc := enc8bit
	if !l.eightBit || !eightBitMIME {
		enc = encQP
	}
	if l.boundary == "" {
		ct, body := textPlain, l.text
		if l.text == "" {
			ct, body = textHTML, l.html
		}
		// go-mail writes a lone part's headers through its header folding.
		h = appendHeader(h, string(gomail.HeaderContentTransferEnc), enc[len("Content-Transfer-Encoding: "):len(enc)-2])
		h = appendHeader(h, string(gomail.HeaderContentType), ct[len("Content-Type: "):len(ct)-2])
		h = append(h, "\r\n"...)
		head.b = h
		_, _ = d.Write(h)
		writePartBody(d, body, enc == encQP)
		return nil
	}
	h = append(h, "Content-Type: multipart/alternative;\r\n boundary="...)
	h = append(h, l.boundary...)
	h = append(h, "\r\n\r\n--"...)
	h = append(h, l.boundary...)
	h = append(h, "\r\n"...)
	h = append(h, enc...)
	h = append(h, textPlain...)
	h = append(h, "\r\n"...)
	head.b = h
	_, _ = d.Write(h)
	writePartBody(d, l.text, enc == encQP)
	h = append(h[:0], "\r\n--"...)
	h = append(h, l.boundary...)
	h = append(h, "\r\n"...)
	h = append(h, enc...)
	h = append(h, textHTML...)
	h = append(h, "\r\n"...)
	_, _ = d.Write(h)
	writePartBody(d, l.html, enc == encQP)
	h = append(h[:0], "\r\n--"...)
	h = append(h, l.boundary...)
	h = append(h, "--\r\n"...)
	_, _ = d.Write(h)
	head.b = h
	return nil
}

// writePartBody writes a part's content, as is or quoted-printable.
func writePartBody(d ContentWriter, s string, qp bool) {
	if !qp {
		_, _ = d.WriteString(s)
		return
	}
	w := quotedprintable.NewWriter(d)
	_, _ = io.WriteString(w, s)
	_ = w.Close()
}

// appendHeader appends the header field name: value as go-mail's
// msgWriter.writeHeader writes it: folded before a word that would reach
// its 76th column, no space left before a fold, CRLF at the end.
func appendHeader(b []byte, name, value string) []byte {
	start := len(b)
	room := gomail.MaxHeaderLength - 2 - len(name) - 2
	b = append(b, name...)
	b = append(b, ": "...)
	folded := false
	for {
		word, rest, more := strings.Cut(value, " ")
		if room-len(word) <= 1 {
			b = append(b, "\r\n "...)
			room = gomail.MaxHeaderLength - 3
			folded = true
		}
		b = append(b, word...)
		if more {
			b = append(b, ' ')
			room--
		}
		room -= len(word)
		if !more {
			break
		}
		value = rest
	}
	if folded {
		b = b[:start+dropSpaceBeforeCRLF(b[start:])]
	}
	return append(b, "\r\n"...)
}

// dropSpaceBeforeCRLF removes, in place, each space that comes right
// before a CRLF (go-mail's ReplaceAll of " \r\n" by "\r\n") and returns
// the new length.
func dropSpaceBeforeCRLF(s []byte) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' && i+2 < len(s) && s[i+1] == '\r' && s[i+2] == '\n' {
			continue
		}
		s[n] = s[i]
		n++
	}
	return n
}
