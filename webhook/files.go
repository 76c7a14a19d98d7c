package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"
)

// Files are the paths of the providers' key files; a provider whose path
// is empty is not configured (SES: configured by its topics). The files
// are read once, by FromFiles; a changed key needs a restart.
type Files struct {
	// PostmarkCredentials holds "user:password", the HTTP Basic
	// credentials of the webhook URL set at Postmark.
	PostmarkCredentials string
	// SESCertificates holds PEM signing certificates to trust instead of
	// fetching SigningCertURL (optional).
	SESCertificates string
	// SendGridPublicKey holds the Signed Event Webhook's verification key,
	// base64, as SendGrid shows it.
	SendGridPublicKey string
	// MailgunSigningKey holds the HTTP webhook signing key.
	MailgunSigningKey string
	// ResendSecret holds the webhook's signing secret, "whsec_...".
	ResendSecret string
}

// Options are what the providers share, and SES's topics.
type Options struct {
	// Tolerance bounds how far a signed timestamp may be from the
	// receiver's clock; DefaultTolerance when zero.
	Tolerance time.Duration
	// SESTopics are the SNS topic ARNs SES publishes to; SES is
	// configured when there is at least one.
	SESTopics []string
	// Client fetches SNS signing certificates and confirms SNS
	// subscriptions; http.DefaultClient when nil.
	Client *http.Client
}

// maxKeyFile bounds a key file: every key is far smaller.
const maxKeyFile = 64 << 10

// FromFiles reads the key files and builds the configured providers, in
// the order postmark, ses, sendgrid, mailgun, resend. An unreadable,
// empty or malformed file is an error that names the file and what is
// wrong, never its content.
func FromFiles(f Files, o Options) ([]Provider, error) {
	var out []Provider
	var errs []error
	read := func(what, path string) []byte {
		b, err := readKeyFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
		return b
	}
	if f.PostmarkCredentials != "" {
		if b := read("postmark credentials", f.PostmarkCredentials); b != nil {
			p, err := NewPostmark(b)
			out, errs = add(out, errs, p, err, f.PostmarkCredentials)
		}
	}
	if len(o.SESTopics) > 0 || f.SESCertificates != "" {
		c := SESConfig{Topics: o.SESTopics, Client: o.Client, Tolerance: o.Tolerance}
		ok := true
		if f.SESCertificates != "" {
			c.Certificates = read("ses certificates", f.SESCertificates)
			ok = c.Certificates != nil
		}
		if ok {
			p, err := NewSES(c)
			out, errs = add(out, errs, p, err, f.SESCertificates)
		}
	}
	if f.SendGridPublicKey != "" {
		if b := read("sendgrid verification key", f.SendGridPublicKey); b != nil {
			p, err := NewSendGrid(b, o.Tolerance)
			out, errs = add(out, errs, p, err, f.SendGridPublicKey)
		}
	}
	if f.MailgunSigningKey != "" {
		if b := read("mailgun signing key", f.MailgunSigningKey); b != nil {
			p, err := NewMailgun(b, o.Tolerance)
			out, errs = add(out, errs, p, err, f.MailgunSigningKey)
		}
	}
	if f.ResendSecret != "" {
		if b := read("resend signing secret", f.ResendSecret); b != nil {
			p, err := NewResend(b, o.Tolerance)
			out, errs = add(out, errs, p, err, f.ResendSecret)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// add appends p, or err naming the file it came from.
func add(out []Provider, errs []error, p Provider, err error, path string) ([]Provider, []error) {
	if err != nil {
		if path != "" {
			err = fmt.Errorf("%s: %w", path, err)
		}
		return out, append(errs, err)
	}
	return append(out, p), errs
}

// readKeyFile reads a key file; empty is an error. A nil result means an
// error.
func readKeyFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > maxKeyFile {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a key file", path, maxKeyFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	return b, nil
}
