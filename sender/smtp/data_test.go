package smtp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strings"
	"testing"

	gomail "github.com/wneessen/go-mail"

	"github.com/weeklydigest/digest/digest"
)

// dotWriterBytes is what net/textproto's dotWriter (go-mail's DATA writer)
// writes for the writes chunks, Close included.
func dotWriterBytes(t testing.TB, chunks [][]byte) []byte {
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	w := textproto.NewWriter(bw).DotWriter()
	for _, c := range chunks {
		if _, err := w.Write(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func dataBufferBytes(chunks [][]byte) []byte {
	d := getDataBuffer()
	defer putDataBuffer(d)
	for _, c := range chunks {
		_, _ = d.Write(c)
	}
	d.end()
	return bytes.Clone(d.b)
}

// split cuts data into chunks of the lengths in cuts (each byte one
// length, the rest of data last), as go-mail's writes would.
func split(data, cuts []byte) [][]byte {
	var chunks [][]byte
	for _, n := range cuts {
		n := min(int(n), len(data))
		chunks = append(chunks, data[:n])
		data = data[n:]
	}
	return append(chunks, data)
}

var dataCases = []string{
	"",
	".",
	"\r",
	"\n",
	"\r\n",
	"a",
	"a\r\n",
	".a\r\n..b\r\n.\r\n",
	"a\nb\n.c\n",
	"a\r\rb\r\n",
	"a\r.b\r\n.",
	"\r\r\n\n\r.\r\n.\n",
	"Subject: x\r\n\r\n.line\r\ntext\nend",
}

func TestDataBufferIsDotWriter(t *testing.T) {
	t.Parallel()
	for _, c := range dataCases {
		for _, cuts := range [][]byte{nil, {0}, {1}, {1, 1, 1, 1, 1, 1, 1, 1}, {2, 3}, {3, 0, 2}} {
			chunks := split([]byte(c), cuts)
			if got, want := dataBufferBytes(chunks), dotWriterBytes(t, chunks); !bytes.Equal(got, want) {
				t.Errorf("%q in chunks %v:\n got %q\nwant %q", c, cuts, got, want)
			}
		}
	}
}

// FuzzDataBuffer checks that dataBuffer writes, for any content cut into
// any writes, exactly the bytes of textproto's dotWriter.
func FuzzDataBuffer(f *testing.F) {
	for _, c := range dataCases {
		f.Add([]byte(c), []byte{})
		f.Add([]byte(c), []byte{1, 2})
	}
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		chunks := split(data, cuts)
		if got, want := dataBufferBytes(chunks), dotWriterBytes(t, chunks); !bytes.Equal(got, want) {
			t.Fatalf("%q in chunks %v:\n got %q\nwant %q", data, cuts, got, want)
		}
	})
}

// dataServer is the server's side of sendData's exchange, on a pipe: it
// reads DATA, answers it with dataReply, reads the content up to the final
// dot or, when readLimit is not negative, only that many bytes, then
// answers with finalReply, or closes when that is empty.
type dataServer struct {
	dataReply  string
	readLimit  int
	finalReply string
	before354  func() // runs before the reply to DATA
}

// run serves one sendData on conn and returns the content it read.
func (s dataServer) run(conn net.Conn) []byte {
	defer conn.Close()
	r := bufio.NewReader(conn)
	if line, err := r.ReadString('\n'); err != nil || line != "DATA\r\n" {
		return nil
	}
	if s.before354 != nil {
		s.before354()
	}
	if _, err := io.WriteString(conn, s.dataReply); err != nil || !strings.HasPrefix(s.dataReply, "354") {
		return nil
	}
	var content []byte
	if s.readLimit >= 0 {
		content = make([]byte, s.readLimit)
		n, _ := io.ReadFull(r, content)
		return content[:n]
	}
	for !bytes.HasSuffix(content, []byte("\r\n.\r\n")) {
		b, err := r.ReadByte()
		if err != nil {
			return content
		}
		content = append(content, b)
	}
	if s.finalReply != "" {
		_, _ = io.WriteString(conn, s.finalReply)
	}
	return content
}

// sendData's stages, as classifySMTP reads them: only a final dot sent
// and left without a reply is ambiguous; a content write that fails (the
// server gone, or the lease's cut-off passed: leaseConn refuses the write)
// never delivered the final dot, so is temporary.
func TestSendDataStages(t *testing.T) {
	t.Parallel()
	d := getDataBuffer()
	for i := range 2000 { // larger than textproto's buffer: written straight through
		fmt.Fprintf(d, "line %d\n.dot\n", i)
	}
	d.end()
	content := d.b
	var lc *leaseConn
	cases := []struct {
		name      string
		srv       dataServer
		wantStage gomail.SendErrReason
		wantClass digest.SendClass // of the failure
		wantRead  []byte           // what the server read
	}{
		{name: "accepted", srv: dataServer{dataReply: "354 go ahead\r\n", readLimit: -1, finalReply: "250 2.0.0 Ok: queued as 4F2A1\r\n"},
			wantRead: content},
		{name: "DATA refused", srv: dataServer{dataReply: "554 5.3.4 no\r\n"}, wantStage: gomail.ErrSMTPData, wantClass: digest.SendPermanent},
		{name: "DATA unanswered", srv: dataServer{dataReply: ""}, wantStage: gomail.ErrSMTPData, wantClass: digest.SendTemporary},
		{name: "server gone in the content", srv: dataServer{dataReply: "354 go ahead\r\n", readLimit: 1000},
			wantStage: gomail.ErrWriteContent, wantClass: digest.SendTemporary, wantRead: content[:1000]},
		{name: "lease passed before the content", srv: dataServer{dataReply: "354 go ahead\r\n", readLimit: 10,
			before354: func() { lc.cut.Store(1) }}, wantStage: gomail.ErrWriteContent, wantClass: digest.SendTemporary, wantRead: []byte{}},
		{name: "final dot unanswered", srv: dataServer{dataReply: "354 go ahead\r\n", readLimit: -1},
			wantStage: gomail.ErrSMTPDataClose, wantClass: digest.SendAmbiguous, wantRead: content},
		{name: "final dot refused", srv: dataServer{dataReply: "354 go ahead\r\n", readLimit: -1, finalReply: "451 4.3.0 later\r\n"},
			wantStage: gomail.ErrSMTPDataClose, wantClass: digest.SendTemporary, wantRead: content},
	}
	for _, c := range cases {
		// Not parallel: lc is the case's connection.
		client, server := net.Pipe()
		lc = &leaseConn{Conn: client}
		read := make(chan []byte, 1)
		go func() { read <- c.srv.run(server) }()
		reply, stage, err := sendData(textproto.NewConn(lc), content)
		_ = lc.Close()
		got := <-read
		switch {
		case c.wantStage == 0 && (err != nil || reply != "2.0.0 Ok: queued as 4F2A1"):
			t.Errorf("%s: sendData = %q, %v; want the reply", c.name, reply, err)
		case c.wantStage != 0 && (err == nil || stage != c.wantStage):
			t.Errorf("%s: sendData failed at %v (%v), want at %v", c.name, stage, err, c.wantStage)
		case c.wantStage != 0 && digest.SendClassOf(classifySMTP(stage, err)) != c.wantClass:
			t.Errorf("%s: class %s, want %s", c.name, digest.SendClassOf(classifySMTP(stage, err)), c.wantClass)
		}
		if !bytes.Equal(got, c.wantRead) {
			t.Errorf("%s: the server read %d bytes, want %d", c.name, len(got), len(c.wantRead))
		}
	}
}
