package smtp

import (
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"regexp"

	gomail "github.com/wneessen/go-mail"

	"github.com/weeklydigest/digest/digest"
)

// ErrDial is wrapped when no connection to the SMTP server could be made:
// refused, timed out, TLS or AUTH failed. Nothing was sent, so it is
// temporary.
var ErrDial = errors.New("connect to SMTP server")

// classifySMTP turns the failure of one exchange (Mailer.exchange) into the
// domain's classes, by the stage that failed (go-mail's reasons) and the
// SMTP reply code of err (0 when the failure was not an SMTP reply but the
// connection):
//
//   - a 4xx reply at any stage: temporary; 5xx: permanent;
//   - no reply while closing DATA (ErrSMTPDataClose): the final dot may have
//     reached the server and been accepted; ambiguous;
//   - no reply at any earlier stage (NOOP, MAIL, RCPT, DATA, writing the
//     content): the message was not complete, so the server cannot have
//     accepted it; temporary;
//   - anything unrecognised: ambiguous, the safe assumption.
func classifySMTP(stage gomail.SendErrReason, err error) error {
	code, enhanced := replyCode(err)
	class := digest.ClassAmbiguous
	switch {
	case code >= 400 && code < 500:
		class = digest.ClassTemporary
	case code >= 500 && code < 600:
		class = digest.ClassPermanent
	default:
		switch stage {
		case gomail.ErrSMTPDataClose, gomail.ErrSMTPReset, gomail.ErrAmbiguous:
			class = digest.ClassAmbiguous
		case gomail.ErrConnCheck, gomail.ErrSMTPMailFrom, gomail.ErrSMTPRcptTo, gomail.ErrSMTPData, gomail.ErrWriteContent:
			class = digest.ClassTemporary
		case gomail.ErrGetSender, gomail.ErrGetRcpts, gomail.ErrNoUnencoded:
			class = digest.ClassPermanent
		}
	}
	return &digest.SendError{Class: class, Err: &SMTPError{Stage: stage.String(), Code: code, EnhancedCode: enhanced, err: err}}
}

// reusable reports whether a failure on a pooled connection left nothing
// at the server, so the message may go again at once on a new connection:
// it struck before the content (NOOP, MAIL, RCPT or the DATA command) and
// was the connection ending (no reply, but not a timeout: a server that
// is slow stays slow) or the server saying it closes it (421).
func reusable(stage gomail.SendErrReason, err error) bool {
	switch stage {
	case gomail.ErrConnCheck, gomail.ErrSMTPMailFrom, gomail.ErrSMTPRcptTo, gomail.ErrSMTPData:
	default:
		return false
	}
	var ne net.Error
	switch code, _ := replyCode(err); {
	case code == 421:
		return true
	case code != 0, errors.As(err, &ne) && ne.Timeout():
		return false
	}
	return true
}

var enhancedRe = regexp.MustCompile(`^[245]\.\d{1,3}\.\d{1,3}\b`)

// replyCode returns the SMTP reply code of err and the enhanced status code
// its text starts with, or 0 and "" when err is not a server's reply.
func replyCode(err error) (int, string) {
	var te *textproto.Error
	if !errors.As(err, &te) {
		return 0, ""
	}
	return te.Code, enhancedRe.FindString(te.Msg)
}

// temporary wraps err as a temporary failure.
func temporary(err error) error {
	return &digest.SendError{Class: digest.ClassTemporary, Err: err}
}

// SMTPError is a failed SMTP exchange. Its message names the stage and the
// server's reply code but, unlike go-mail's error it wraps, neither the
// recipient's address nor the server's free text (which often repeats the
// address): errors end up in the ledger, and the ledger holds no customer
// data.
type SMTPError struct {
	Stage        string // e.g. "sending SMTP RCPT TO command"
	Code         int    // the SMTP reply code, or 0 when there was no reply
	EnhancedCode string // e.g. "5.1.1", when the server sent one
	err          error
}

func (e *SMTPError) Error() string {
	if e.Code == 0 {
		return "smtp: " + e.Stage + ": no reply (connection lost or timed out)"
	}
	s := fmt.Sprintf("smtp: %s: reply %d", e.Stage, e.Code)
	if e.EnhancedCode != "" {
		s += " " + e.EnhancedCode
	}
	return s
}

// Unwrap returns go-mail's error, whose message has the details.
func (e *SMTPError) Unwrap() error { return e.err }
