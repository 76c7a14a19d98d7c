package smtp

import (
	"errors"
	"fmt"
	"net/textproto"
	"strconv"

	gomail "github.com/wneessen/go-mail"
)

// bdatError is a failure of the BDAT exchange after its one write began:
// its text and its stage name BDAT, not go-mail's "closing SMTP DATA
// writer" (see classifySMTP).
type bdatError struct {
	what string // "writing" or "reading the replies"
	err  error
}

func (e *bdatError) Error() string { return "BDAT LAST: " + e.what + ": " + e.err.Error() }
func (e *bdatError) Unwrap() error { return e.err }

// bdatStage names the stage of a failed BDAT exchange for SMTPError, or ""
// when err is not one.
func bdatStage(err error) string {
	var be *bdatError
	if !errors.As(err, &be) {
		return ""
	}
	if be.what == "writing" {
		return "writing SMTP BDAT LAST with the message"
	}
	return "awaiting the reply to SMTP BDAT LAST"
}

// errChunkAfterRefusal is a server accepting the message although it
// refused MAIL or a recipient: what it delivered, and to whom, is unknown.
var errChunkAfterRefusal = errors.New("server accepted the message after refusing its envelope")

// sendChunked sends MAIL, one RCPT per recipient and "BDAT <n> LAST" with
// the n bytes of chunk (composeLetter's raw content: not dot-stuffed, no final dot) in
// one write (RFC 3030 CHUNKING with RFC 2920 PIPELINING: the server must
// have advertised both), then reads the replies in order. It returns the
// reply to BDAT, or the stage that failed and its error:
//
//   - ErrSMTPMailFrom or ErrSMTPRcptTo, with the server's reply: MAIL, or
//     every recipient, was refused, so the server had no transaction, or
//     none with a recipient, when it read the chunk, and delivered
//     nothing; the replies after it are still read;
//   - ErrWriteContent: the write failed, so the server has not received
//     the chunk's last bytes, which are the write's last; BDAT LAST is
//     taken only whole, so nothing was delivered (a pooled connection's
//     send goes again on a new one: reusable);
//   - ErrSMTPDataClose: the reply to BDAT (4xx or 5xx: refused), or no
//     reply to any command at all (the connection lost, the deadline
//     passed): unlike the pipelined DATA, whose content waits for 354,
//     the whole message has gone out, and the server may have accepted
//     it; ambiguous, and never sent again on a new connection (reusable);
//   - ErrSMTPDataClose with errChunkAfterRefusal: the server refused MAIL
//     or a recipient and then accepted the chunk (to the recipients it
//     took?): ambiguous.
func sendChunked(text *textproto.Conn, mail string, rcpts []string, chunk []byte) (string, gomail.SendErrReason, error) {
	if stage, err := checkLines(mail, rcpts); err != nil {
		return "", stage, err
	}
	if err := writeChunked(text, mail, rcpts, chunk); err != nil {
		return "", gomail.ErrWriteContent, &bdatError{"writing", err}
	}
	var (
		refused  error // the first refusal of MAIL or RCPT
		stage    gomail.SendErrReason
		accepted int  // recipients taken
		void     bool // nothing can be delivered: MAIL or every RCPT refused
	)
	// read reads one reply; a failed one that is not the server's reply
	// ends the reading.
	read := func(expect int) (string, error, bool) {
		_, msg, err := text.ReadResponse(expect)
		var te *textproto.Error
		return msg, err, err == nil || errors.As(err, &te)
	}
	// lost is the outcome when a reply did not come: nothing delivered if
	// the replies so far say so, otherwise ambiguous.
	lost := func(err error) (string, gomail.SendErrReason, error) {
		if void {
			return "", stage, refused
		}
		return "", gomail.ErrSMTPDataClose, &bdatError{"reading the replies", fmt.Errorf("no reply after the message was sent: %w", err)}
	}
	_, err, ok := read(250)
	if !ok {
		return lost(err)
	}
	if err != nil {
		refused, stage, void = err, gomail.ErrSMTPMailFrom, true
	}
	for i := range rcpts {
		_, err, ok := read(25)
		if !ok {
			return lost(err)
		}
		switch {
		case err == nil:
			accepted++
		case refused == nil:
			refused, stage = err, gomail.ErrSMTPRcptTo
		}
		if i == len(rcpts)-1 && accepted == 0 {
			void = true
		}
	}
	reply, err, ok := read(250)
	switch {
	case !ok:
		return lost(err)
	case err == nil && refused != nil:
		return "", gomail.ErrSMTPDataClose, &bdatError{"reading the replies", fmt.Errorf("%w (%v)", errChunkAfterRefusal, refused)}
	case refused != nil:
		// BDAT refused too, as it must be: the envelope's refusal says why.
		return "", stage, refused
	case err != nil:
		return "", gomail.ErrSMTPDataClose, &bdatError{"reading the replies", err}
	}
	return reply, 0, nil
}

// writeChunked writes the commands and the chunk with one Write on the
// connection: they are put together in a pooled buffer, since through
// text's buffer a chunk larger than its free space goes in two.
func writeChunked(text *textproto.Conn, mail string, rcpts []string, chunk []byte) error {
	out := getDataBuffer()
	defer putDataBuffer(out)
	b := appendEnvelope(out.b, mail, rcpts)
	b = append(b, "BDAT "...)
	b = strconv.AppendInt(b, int64(len(chunk)), 10)
	b = append(b, " LAST\r\n"...)
	b = append(b, chunk...)
	out.b = b
	// text's buffer is empty (every command before was flushed): a write
	// larger than it goes straight to the connection, a smaller one by
	// Flush, at once either way.
	if _, err := text.W.Write(b); err != nil {
		return err
	}
	return text.W.Flush()
}
