package smtp_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender/smtp"
)

// The mailer writes after DATA exactly the bytes that go-mail's writer
// wrote for the same message and server (Msg.WriteTo through textproto's
// dotWriter): the same headers, parts, encodings, dot-stuffing and final
// dot, with and without 8BITMIME, with the commands pipelined or not.
func TestSendWritesWhatGoMailsDataWriterWrote(t *testing.T) {
	t.Parallel()
	from := digest.Address{Name: "Weekly Digest", Email: "digest@example.com"}
	long := strings.Repeat("x", 1200) // no 8bit part: quoted-printable
	msgs := map[string]*digest.Message{
		"plain": testMessage(testKey("k1", 'a')),
		"dots": {Key: testKey("k1", 'b'), To: digest.Address{Name: "Ada", Email: "ada@example.net"}, Subject: ".dot",
			Text: ".\n..two\n.\n\nend.\n.", HTML: ".<p>x</p>\n.\n"},
		"non-ascii": {Key: testKey("k1", 'c'), To: digest.Address{Name: "Zoë Ünal", Email: "zoe@example.net"}, Subject: "Ihre Woche: 3 Zahlungen, 12,50 €",
			Text: "Grüße,\n.€ 12,50\n", HTML: "<p>Grüße</p>\n.<p>€</p>"},
		"quoted-printable": {Key: testKey("k1", 'd'), To: digest.Address{Email: "qp@example.net"}, Subject: "long",
			Text: ".start\n" + long + "\n.\n", HTML: long + ".\n.x"},
		"html-only": {Key: testKey("k1", 'e'), To: digest.Address{Email: "h@example.net"}, Subject: "h", HTML: "<p>only</p>\n.\n"},
		"text-only, test send, unsubscribe": {Key: testKey("k1", 'f'), To: digest.Address{Email: "t@example.net"}, Subject: "t",
			Text: "no newline at the end", Test: true, Unsubscribe: "https://example.com/u?t=1"},
	}
	for _, mode := range []struct{ eightBit, pipelining, chunking bool }{
		{true, true, false}, {true, false, false}, {false, true, false}, {false, false, false},
		{true, true, true}, {false, true, true}, {true, false, true},
	} {
		eightBit := mode.eightBit
		srv := startSMTP(t, fault{})
		srv.no8bit.Store(!eightBit)
		srv.noPipe.Store(!mode.pipelining)
		srv.chunking.Store(mode.chunking)
		chunked := mode.pipelining && mode.chunking
		m := newMailer(t, srv.addr, func(c *smtp.Config) {
			c.Now = func() time.Time { return sendTime }
			c.ListUnsubscribe = "<mailto:u@example.com>"
		})
		for name, msg := range msgs {
			if _, err := m.Send(ctxT(t), msg); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			raw := srv.rawData()
			if chunked {
				raw = srv.rawChunks()
			}
			got := raw[len(raw)-1]
			want, err := smtp.DotWriterData(from, "<mailto:u@example.com>", msg, sendTime, eightBit)
			if err != nil {
				t.Fatal(err)
			}
			// The server keeps DATA's content without the stuffing and the
			// final dot, and BDAT carries just that.
			stored := unstuff(want)
			if chunked {
				want = stored
			}
			if !bytes.Equal(got, want) {
				t.Errorf("8BITMIME %v, PIPELINING %v, CHUNKING %v, %s: the server read\n%q\nwant\n%q", eightBit, mode.pipelining, mode.chunking, name, got, want)
			}
			if all := srv.messages(); !bytes.Equal(all[len(all)-1].data, stored) {
				t.Errorf("8BITMIME %v, PIPELINING %v, CHUNKING %v, %s: the server stored\n%q", eightBit, mode.pipelining, mode.chunking, name, all[len(all)-1].data)
			}
		}
		if n := len(srv.rawChunks()); chunked != (n > 0) {
			t.Errorf("PIPELINING %v, CHUNKING %v: the server read %d BDAT chunks", mode.pipelining, mode.chunking, n)
		}
		if chunked {
			wantChunked(t, srv)
		} else {
			wantPipelined(t, srv, mode.pipelining)
		}
	}
}

// unstuff returns DATA content as the server keeps it: without the
// dot-stuffing and the final dot.
func unstuff(data []byte) []byte {
	data = bytes.TrimSuffix(data, []byte(".\r\n"))
	if bytes.HasPrefix(data, []byte("..")) {
		data = data[1:]
	}
	return bytes.ReplaceAll(data, []byte("\r\n.."), []byte("\r\n."))
}

// selfSigned returns a server certificate for 127.0.0.1 and a client
// configuration that trusts it.
func selfSigned(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// After STARTTLS the content goes on the TLS connection go-mail switched
// to (the client's Text), never on the plain connection under it: the
// server gets the message whole while the plain bytes it read show no
// DATA at all.
func TestSendContentGoesOverSTARTTLS(t *testing.T) {
	t.Parallel()
	serverTLS, clientTLS := selfSigned(t)
	srv := startSMTPTLS(t, fault{}, serverTLS)
	cfg, err := smtp.ParseSMTPURL("smtp://" + srv.addr + "?tls=mandatory")
	if err != nil {
		t.Fatal(err)
	}
	m, err := smtp.NewMailer(smtp.Config{SMTP: cfg, From: digest.Address{Email: "digest@example.com"}, TLSConfig: clientTLS,
		Concurrency: 1, Timeout: 5 * time.Second, HELO: "localhost", Now: func() time.Time { return sendTime }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	msg := testMessage(testKey("k1", 'a'))
	msg.Text = ".leading dot\n" + msg.Text
	for range 2 { // a fresh connection, then the pooled one
		if _, err := m.Send(ctxT(t), msg); err != nil {
			t.Fatal(err)
		}
	}
	want, err := smtp.DotWriterData(digest.Address{Email: "digest@example.com"}, "", msg, sendTime, true)
	if err != nil {
		t.Fatal(err)
	}
	want = unstuff(want)
	got := srv.messages()
	if len(got) != 2 || !bytes.Equal(got[0].data, want) || !bytes.Equal(got[1].data, want) {
		t.Fatalf("the server stored %d messages; want 2 of\n%q", len(got), want)
	}
	if n := srv.count()["DATA"]; n != 0 || len(srv.rawData()) != 0 {
		t.Fatalf("the server read DATA %d times in plain text", n)
	}
	if n := srv.count()["STARTTLS"]; n != 1 {
		t.Fatalf("STARTTLS %d times, want 1", n)
	}
}
