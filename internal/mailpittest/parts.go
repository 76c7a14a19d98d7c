package mailpittest

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
)

// Parsed is a raw message taken apart: its headers and its
// multipart/alternative body, each part decoded.
type Parsed struct {
	Header mail.Header
	Types  []string // the parts' media types, in order
	Text   string   // the text/plain part
	HTML   string   // the text/html part
}

// Parse parses a raw message (see Server.Raw) with a multipart/alternative
// body whose parts are quoted-printable or 7/8-bit.
func Parse(raw []byte) (*Parsed, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		return nil, fmt.Errorf("Content-Type = %q (%v), want multipart/alternative", msg.Header.Get("Content-Type"), err)
	}
	out := &Parsed{Header: msg.Header}
	r := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := r.NextRawPart()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		var body io.Reader = p
		if strings.EqualFold(p.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
			body = quotedprintable.NewReader(p)
		}
		b, err := io.ReadAll(body)
		if err != nil {
			return nil, err
		}
		out.Types = append(out.Types, ct)
		switch ct {
		case "text/plain":
			out.Text = string(b)
		case "text/html":
			out.HTML = string(b)
		}
	}
}
