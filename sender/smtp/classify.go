package smtp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"regexp"
	"strings"

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
	class := digest.SendAmbiguous
	switch {
	case code >= 400 && code < 500:
		class = digest.SendTemporary
	case code >= 500 && code < 600:
		class = digest.SendPermanent
	default:
		switch stage {
		case gomail.ErrSMTPDataClose, gomail.ErrSMTPReset, gomail.ErrAmbiguous:
			class = digest.SendAmbiguous
		case gomail.ErrConnCheck, gomail.ErrSMTPMailFrom, gomail.ErrSMTPRcptTo, gomail.ErrSMTPData, gomail.ErrWriteContent:
			class = digest.SendTemporary
		case gomail.ErrGetSender, gomail.ErrGetRcpts, gomail.ErrNoUnencoded:
			class = digest.SendPermanent
		}
	}
	name := stage.String()
	if bdat := bdatStage(err); bdat != "" {
		name = bdat
	}
	kind := fmt.Sprintf("%s: reply %d", name, code)
	if code == 0 {
		kind = name + ": no reply"
	}
	// 421 closes the session whatever the command: the server refuses
	// everyone for now (rate limit, overload), unlike a 4xx to one RCPT.
	return &digest.SendError{Class: class, Kind: kind, Throttled: code == 421,
		Err: &SMTPError{Stage: name, Code: code, EnhancedCode: enhanced, err: err}}
}

// reusable reports whether a failure on a pooled connection left nothing
// at the server, so the message may go again at once on a new connection:
// it struck before the content (NOOP, MAIL, RCPT or the DATA command) and
// was the connection ending (no reply, but not a timeout: a server that
// is slow stays slow) or the server saying it closes it (421).
//
// With BDAT, a failed write is reusable too: the chunk is the write's last
// bytes and BDAT LAST is taken only whole, so the server cannot have
// delivered the message.
func reusable(stage gomail.SendErrReason, err error) bool {
	switch stage {
	case gomail.ErrConnCheck, gomail.ErrSMTPMailFrom, gomail.ErrSMTPRcptTo, gomail.ErrSMTPData:
	case gomail.ErrWriteContent:
		if bdatStage(err) == "" {
			return false
		}
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

// dialError classifies a failure to open a session (connect, EHLO,
// STARTTLS, AUTH) at addr. Nothing was sent. Failures that no retry can
// fix are digest.SendFatal, with the kind: "starttls" (TLS required, not
// offered), "auth" (refused or no usable mechanism), "dns" (no such host),
// "certificate" (not valid for the host). The rest (refused, timed out,
// reset) are temporary, of kind digest.KindConnect.
func dialError(addr string, err error) error {
	err = fmt.Errorf("%w %s: %w", ErrDial, addr, err)
	kind := fatalDialKind(err)
	if kind == "" {
		return &digest.SendError{Class: digest.SendTemporary, Kind: digest.KindConnect, Err: err}
	}
	return &digest.SendError{Class: digest.SendFatal, Kind: kind, Err: err}
}

func fatalDialKind(err error) string {
	var (
		dns       *net.DNSError
		reply     *textproto.Error
		verify    *tls.CertificateVerificationError
		authority x509.UnknownAuthorityError
		host      x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	msg := err.Error()
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		return "dns"
	case errors.As(err, &verify), errors.As(err, &authority), errors.As(err, &host), errors.As(err, &invalid):
		return "certificate"
	case errors.As(err, &reply) && reply.Code >= 530 && reply.Code <= 538:
		return "auth" // 530 auth required, 534 mechanism too weak, 535 credentials invalid, 538 encryption required
	case errors.Is(err, gomail.ErrNoSupportedAuthDiscovered), errors.Is(err, gomail.ErrPlainAuthNotSupported),
		errors.Is(err, gomail.ErrLoginAuthNotSupported), errors.Is(err, gomail.ErrCramMD5AuthNotSupported),
		errors.Is(err, gomail.ErrXOauth2AuthNotSupported):
		return "auth"
	// go-mail reports these two with untyped errors: their text is all
	// there is to go by.
	case strings.Contains(msg, "does not support STARTTLS"):
		return "starttls"
	case strings.Contains(msg, "server does not support SMTP AUTH"):
		return "auth"
	}
	return ""
}

// temporary wraps err as a temporary failure.
func temporary(err error) error {
	return &digest.SendError{Class: digest.SendTemporary, Err: err}
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
