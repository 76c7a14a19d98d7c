package smtp

import (
	"errors"
	"fmt"

	gomail "github.com/wneessen/go-mail"

	"github.com/weeklydigest/digest/digest"
)

// ErrDial is wrapped when no connection to the SMTP server could be made:
// refused, timed out, TLS or AUTH failed. Nothing was sent, so it is
// temporary.
var ErrDial = errors.New("connect to SMTP server")

// classifySMTP turns the result of one go-mail send into the domain's
// classes. delivered is msg.IsDelivered(): go-mail sets it once the server
// answered 250 to the end of DATA, and it wins over any later error (a
// failed RSET after acceptance must not cause a resend).
//
// The rest goes by the stage go-mail reports (gomail.SendError.Reason) and
// the SMTP reply code it parsed (ErrorCode, 0 when the failure was not an
// SMTP reply but the connection):
//
//   - a 4xx reply at any stage: temporary; 5xx: permanent;
//   - no reply while closing DATA (ErrSMTPDataClose): the final dot may have
//     reached the server and been accepted; ambiguous;
//   - no reply at any earlier stage (NOOP, MAIL, RCPT, DATA, writing the
//     content): the message was not complete, so the server cannot have
//     accepted it; temporary;
//   - anything unrecognised: ambiguous, the safe assumption.
func classifySMTP(err error, delivered bool) error {
	if err == nil || delivered {
		return nil
	}
	var se *gomail.SendError
	if !errors.As(err, &se) {
		return &digest.SendError{Class: digest.ClassAmbiguous, Err: err}
	}
	class := digest.ClassAmbiguous
	switch code := se.ErrorCode(); {
	case code >= 400 && code < 500:
		class = digest.ClassTemporary
	case code >= 500 && code < 600:
		class = digest.ClassPermanent
	default:
		switch se.Reason {
		case gomail.ErrSMTPDataClose, gomail.ErrSMTPReset, gomail.ErrAmbiguous:
			class = digest.ClassAmbiguous
		case gomail.ErrConnCheck, gomail.ErrSMTPMailFrom, gomail.ErrSMTPRcptTo, gomail.ErrSMTPData, gomail.ErrWriteContent:
			class = digest.ClassTemporary
		case gomail.ErrGetSender, gomail.ErrGetRcpts, gomail.ErrNoUnencoded:
			class = digest.ClassPermanent
		}
	}
	return &digest.SendError{Class: class, Err: &SMTPError{
		Stage: se.Reason.String(), Code: se.ErrorCode(), EnhancedCode: se.EnhancedStatusCode(), err: se,
	}}
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
	err          *gomail.SendError
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
