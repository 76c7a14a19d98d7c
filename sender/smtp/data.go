package smtp

import (
	"bytes"
	"net/textproto"
	"sync"
	"unsafe"

	gomail "github.com/wneessen/go-mail"

	"github.com/weeklydigest/digest/sender"
)

// dataBuffer is a message composed for DATA: go-mail's Msg.WriteTo writes
// into it and it dot-stuffs as it appends, so that the whole content and
// its final dot go to the server in one write (sendData). Going through
// net/textproto's dotWriter instead costs a bufio WriteByte for every byte
// of every message; this does the same transformation a line at a time.
//
// The bytes are exactly the dotWriter's for the same writes (see
// FuzzDataBuffer): a line that starts with '.' gets another '.', a bare LF
// becomes CRLF (the 8bit parts end their lines with LF alone), a CR not
// followed by LF is left as it is, and end writes the terminator that
// dotWriter.Close writes.
//
// With raw set (BDAT: composeLetter) it does the same but for the dots: BDAT
// content is sent as is (RFC 3030), so no line is stuffed, and end only
// ends the last line.
type dataBuffer struct {
	b     []byte
	state int
	raw   bool
}

// The states of dotWriter, with the same meaning.
const (
	dataBegin     = iota // nothing written yet
	dataBeginLine        // at the start of a line
	dataCR               // after a CR (maybe the end of a line)
	dataMid              // in the middle of a line
)

// Write appends p, dot-stuffed, continuing from where the last Write
// ended. It never fails.
func (d *dataBuffer) Write(p []byte) (int, error) {
	lf := nextLF(p, 0)
	for i := 0; i < len(p); {
		switch d.state {
		case dataBegin, dataBeginLine:
			if p[i] == '.' && !d.raw {
				d.b = append(d.b, '.')
			}
			d.state = dataMid
		case dataCR:
			// The byte after a CR is written as is: an LF ends the line,
			// anything else (a second CR included) is data.
			c := p[i]
			d.b = append(d.b, c)
			i++
			d.state = dataMid
			if c == '\n' {
				d.state = dataBeginLine
				lf = nextLF(p, i)
			}
			continue
		}
		// In a line: copy up to its next CR, or to its LF, at once.
		end := lf
		if end < 0 {
			end = len(p)
		}
		if j := bytes.IndexByte(p[i:end], '\r'); j >= 0 {
			d.b = append(d.b, p[i:i+j+1]...)
			d.state = dataCR
			i += j + 1
			continue
		}
		d.b = append(d.b, p[i:end]...)
		if lf < 0 {
			break
		}
		d.b = append(d.b, '\r', '\n')
		d.state = dataBeginLine
		i = lf + 1
		lf = nextLF(p, i)
	}
	return len(p), nil
}

// WriteString is Write for a string, without copying it: Write only
// reads p.
func (d *dataBuffer) WriteString(s string) (int, error) {
	return d.Write(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// nextLF returns the index of the first LF in p at or after i, or -1.
func nextLF(p []byte, i int) int {
	if j := bytes.IndexByte(p[i:], '\n'); j >= 0 {
		return i + j
	}
	return -1
}

// end appends what dotWriter.Close writes: the end of the last line, when
// it has not ended, and the final dot; for a raw buffer, only the end of
// the last line, so that the chunk is what the server keeps of the DATA
// content once it has removed the stuffing and the final dot.
func (d *dataBuffer) end() {
	if d.raw {
		switch d.state {
		case dataBeginLine:
		case dataCR:
			d.b = append(d.b, '\n')
		default:
			d.b = append(d.b, '\r', '\n')
		}
		return
	}
	switch d.state {
	case dataBeginLine:
		d.b = append(d.b, ".\r\n"...)
	case dataCR:
		d.b = append(d.b, "\n.\r\n"...)
	default:
		d.b = append(d.b, "\r\n.\r\n"...)
	}
}

// maxPooledData is the largest buffer kept for the next message: a digest
// is tens of KiB; an exceptional message's buffer is left to the GC.
const maxPooledData = 1 << 20

var dataBuffers = sync.Pool{New: func() any { return &dataBuffer{b: make([]byte, 0, 32<<10)} }}

func getDataBuffer() *dataBuffer {
	d := dataBuffers.Get().(*dataBuffer)
	d.b, d.state, d.raw = d.b[:0], dataBegin, false
	return d
}

func putDataBuffer(d *dataBuffer) {
	if cap(d.b) <= maxPooledData {
		dataBuffers.Put(d)
	}
}

// composeLetter writes l into a pooled buffer as the content of DATA
// (dot-stuffed, with its final dot) or, with raw set, of BDAT LAST (the
// same lines, neither stuffed nor dotted), for a server that does or does
// not take 8bit parts (8BITMIME). The caller returns it with
// putDataBuffer. The letter is left as it was, for another attempt.
func composeLetter(l *sender.Letter, eightBitMIME, raw bool) (*dataBuffer, error) {
	d := getDataBuffer()
	d.raw = raw
	if err := l.Compose(d, eightBitMIME); err != nil {
		putDataBuffer(d)
		return nil, err
	}
	d.end()
	return d, nil
}

// sendData sends DATA on text and, after the server's 354, content (the
// message, dot-stuffed, with its final dot: composeLetter) in one write,
// then reads the server's reply to the final dot. It is what go-mail's
// Client.Data, DataCloser.Write and DataCloser.Close do, without the
// dotWriter. It returns the reply's text, or the stage that failed:
//
//   - ErrSMTPData: the DATA command, no content sent;
//   - ErrWriteContent: the write failed, so the server has not received
//     the whole final dot (a Write that fails has written less than all
//     of its bytes, and the final dot is the last of them) and cannot
//     have accepted the message;
//   - ErrSMTPDataClose: no reply (or a failed one) to the final dot, which
//     was sent: the server may have accepted the message.
func sendData(text *textproto.Conn, content []byte) (string, gomail.SendErrReason, error) {
	id, err := text.Cmd("DATA")
	if err != nil {
		return "", gomail.ErrSMTPData, err
	}
	text.StartResponse(id)
	_, _, err = text.ReadResponse(354)
	text.EndResponse(id)
	if err != nil {
		return "", gomail.ErrSMTPData, err
	}
	return sendContent(text, content)
}

// sendContent writes content after the server's 354 to DATA, sent
// sequentially (sendData) or pipelined (sendEnvelope), and reads the reply
// to its final dot; its stages are sendData's after DATA.
func sendContent(text *textproto.Conn, content []byte) (string, gomail.SendErrReason, error) {
	// The command was flushed, so the buffer is empty and a content larger
	// than it goes straight to the connection; a smaller one goes by Flush.
	if _, err := text.W.Write(content); err != nil {
		return "", gomail.ErrWriteContent, err
	}
	if err := text.W.Flush(); err != nil {
		return "", gomail.ErrWriteContent, err
	}
	_, reply, err := text.ReadResponse(250)
	if err != nil {
		return "", gomail.ErrSMTPDataClose, err
	}
	return reply, 0, nil
}
