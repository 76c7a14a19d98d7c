package smtp

import (
	"errors"
	"net/textproto"
	"strings"

	gomail "github.com/wneessen/go-mail"
	gosmtp "github.com/wneessen/go-mail/smtp"
)

// errLineBreak is go-mail's validateLine error: an address with CR or LF
// would end the command early and start another (command injection).
var errLineBreak = errors.New("smtp: A line must not contain CR or LF")

// mailCommand returns the MAIL command, without its CRLF, that go-mail's
// Client.Mail sends for from on client: BODY=8BITMIME when the server
// has 8BITMIME, SMTPUTF8 when it has SMTPUTF8. go-mail adds SMTPUTF8
// unless WithoutSMTPUTF8 was given, and RET=... only after
// SetDSNMailReturnOption, which only its Client.Send calls: clientOptions
// gives neither, and exchange never calls Send, so those two never apply
// here (TestMailCommandIsGoMails pins this against go-mail's own).
func mailCommand(client *gosmtp.Client, from string) string {
	cmd := "MAIL FROM:" + from
	if ok, _ := client.Extension("8BITMIME"); ok {
		cmd += " BODY=8BITMIME"
	}
	if ok, _ := client.Extension("SMTPUTF8"); ok {
		cmd += " SMTPUTF8"
	}
	return cmd
}

// checkLines refuses an address with CR or LF, which would end its command
// early and start another (command injection), as go-mail's Client.Mail
// and Client.Rcpt do.
func checkLines(mail string, rcpts []string) (gomail.SendErrReason, error) {
	if strings.ContainsAny(mail, "\r\n") {
		return gomail.ErrSMTPMailFrom, errLineBreak
	}
	for _, r := range rcpts {
		if strings.ContainsAny(r, "\r\n") {
			return gomail.ErrSMTPRcptTo, errLineBreak
		}
	}
	return 0, nil
}

// appendEnvelope appends the MAIL command and one RCPT per recipient, each
// with its CRLF, to b.
func appendEnvelope(b []byte, mail string, rcpts []string) []byte {
	b = append(b, mail...)
	b = append(b, "\r\n"...)
	for _, r := range rcpts {
		b = append(b, "RCPT TO:"...)
		b = append(b, r...)
		b = append(b, "\r\n"...)
	}
	return b
}

// sendEnvelope sends MAIL, one RCPT per recipient and DATA in one write
// (RFC 2920 PIPELINING: the server must have advertised it), then reads
// their replies in order. It returns nil when the server took every
// recipient and answered DATA with 354, so that the content goes next
// (sendContent), or the stage that failed and its error, always before
// any content: nothing can have been delivered.
//
// The server answers every pipelined command, so the replies are all read
// even after one failed, and the first failure is the one reported (a RCPT
// refused because MAIL was, is MAIL's failure). A server that nevertheless
// says 354 gets an empty message ended at once, which it cannot deliver
// for want of a recipient. A reply that does not come (the connection
// lost, the deadline passed) ends the reading: the caller drops the
// connection after any failure.
func sendEnvelope(text *textproto.Conn, mail string, rcpts []string) (gomail.SendErrReason, error) {
	if stage, err := checkLines(mail, rcpts); err != nil {
		return stage, err
	}
	// The commands fit text's buffer: Flush writes them at once.
	w := text.W
	_, _ = w.Write(appendEnvelope(w.AvailableBuffer(), mail, rcpts))
	_, _ = w.WriteString("DATA\r\n")
	if err := w.Flush(); err != nil {
		return gomail.ErrSMTPMailFrom, err
	}
	var (
		failed error // the first failure
		stage  gomail.SendErrReason
	)
	// reply reads one reply and reports whether one came (whatever its
	// code), so the connection is still in step with the commands.
	reply := func(expect int, st gomail.SendErrReason) (bool, error) {
		_, _, err := text.ReadResponse(expect)
		if err != nil && failed == nil {
			failed, stage = err, st
		}
		var te *textproto.Error
		return err == nil || errors.As(err, &te), err
	}
	if ok, _ := reply(250, gomail.ErrSMTPMailFrom); !ok {
		return stage, failed
	}
	for range rcpts {
		if ok, _ := reply(25, gomail.ErrSMTPRcptTo); !ok {
			return stage, failed
		}
	}
	envelope := failed
	ok, err := reply(354, gomail.ErrSMTPData)
	if ok && err == nil && envelope != nil {
		// A server that took DATA after MAIL or RCPT failed: end the empty
		// message at once and read what it says to it; the envelope's
		// failure stands.
		_, _ = w.WriteString(".\r\n")
		if w.Flush() == nil {
			_, _, _ = text.ReadResponse(0)
		}
	}
	return stage, failed
}
