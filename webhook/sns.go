package webhook

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // SNS SignatureVersion 1 is SHA1withRSA; the topic chooses it, not us.
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
)

// snsMessage is the envelope Amazon SNS posts to an HTTP(S) subscriber
// (https://docs.aws.amazon.com/sns/latest/dg/sns-message-and-json-formats.html).
type snsMessage struct {
	Type             string
	MessageID        string `json:"MessageId"`
	Token            string
	TopicArn         string
	Subject          *string
	Message          string
	Timestamp        string
	SignatureVersion string
	Signature        string
	SigningCertURL   string
	SubscribeURL     string
}

// stringToSign is the canonical string SNS signs: the documented fields,
// in this order, each as "Name\nvalue\n"; Subject only when present.
// https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html
func (m *snsMessage) stringToSign() (string, error) {
	subject := []string{}
	if m.Subject != nil {
		subject = []string{"Subject", *m.Subject}
	}
	var fields []string
	switch m.Type {
	case "Notification":
		fields = append([]string{"Message", m.Message, "MessageId", m.MessageID}, subject...)
		fields = append(fields, "Timestamp", m.Timestamp)
	case "SubscriptionConfirmation", "UnsubscribeConfirmation":
		fields = []string{"Message", m.Message, "MessageId", m.MessageID, "SubscribeURL", m.SubscribeURL,
			"Timestamp", m.Timestamp, "Token", m.Token}
	default:
		return "", fmt.Errorf("%w: SNS message type %q", ErrPayload, safeText(m.Type, 40))
	}
	var b strings.Builder
	for _, f := range append(fields, "TopicArn", m.TopicArn, "Type", m.Type) {
		b.WriteString(f + "\n")
	}
	return b.String(), nil
}

// snsHost is the host of an SNS signing certificate or subscribe URL:
// sns.<region>.amazonaws.com, or .amazonaws.com.cn in China.
var snsHost = regexp.MustCompile(`^sns\.[a-z]{2}(-[a-z]+)+-[0-9]+\.amazonaws\.com(\.cn)?$`)

// snsCertPath is the path of SNS's signing certificates.
var snsCertPath = regexp.MustCompile(`^/SimpleNotificationService-[0-9a-f]{1,64}\.pem$`)

// snsURL parses u and checks it is https on an SNS host: a message may
// name any URL, and the receiver must neither fetch a key from nor GET a
// URL of another host.
func snsURL(u string) (*url.URL, error) {
	p, err := url.Parse(u)
	if err != nil || p.Scheme != "https" || p.User != nil || p.Port() != "" || !snsHost.MatchString(p.Hostname()) {
		return nil, errors.New("not an https URL on an sns.<region>.amazonaws.com host")
	}
	return p, nil
}

// snsCertURL is snsURL for a signing certificate: also its documented
// path, so that a forged message cannot make the receiver fetch any
// other URL of the host.
func snsCertURL(u string) (*url.URL, error) {
	p, err := snsURL(u)
	if err != nil {
		return nil, err
	}
	if !snsCertPath.MatchString(p.EscapedPath()) || p.RawQuery != "" || p.Fragment != "" {
		return nil, errors.New("not an SNS signing certificate's path (/SimpleNotificationService-HEX.pem)")
	}
	return p, nil
}

// snsCerts gives the certificate that signed a message: a pinned one, or
// the one at SigningCertURL, fetched once per URL.
type snsCerts struct {
	pinned []*x509.Certificate
	client *http.Client

	mu    sync.Mutex
	cache map[string]*x509.Certificate
}

// maxCachedCerts bounds the cache of fetched certificates.
const maxCachedCerts = 16

// maxCertSize bounds a fetched certificate.
const maxCertSize = 64 << 10

// verify checks m's signature.
func (c *snsCerts) verify(ctx context.Context, m *snsMessage, now time.Time) error {
	var h crypto.Hash
	switch m.SignatureVersion {
	case "1":
		h = crypto.SHA1
	case "2":
		h = crypto.SHA256
	default:
		return fmt.Errorf("%w: SNS SignatureVersion %q", ErrSignature, safeText(m.SignatureVersion, 8))
	}
	s, err := m.stringToSign()
	if err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(m.Signature)
	if err != nil {
		return fmt.Errorf("%w: SNS signature is not base64", ErrSignature)
	}
	var sum []byte
	if h == crypto.SHA1 {
		d := sha1.Sum([]byte(s)) //nolint:gosec // see the import
		sum = d[:]
	} else {
		d := sha256.Sum256([]byte(s))
		sum = d[:]
	}
	certs := c.pinned
	if len(certs) == 0 {
		cert, err := c.fetch(ctx, m.SigningCertURL)
		if err != nil {
			return err
		}
		certs = []*x509.Certificate{cert}
	}
	for _, cert := range certs {
		pub, ok := cert.PublicKey.(*rsa.PublicKey)
		if !ok || now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
			continue
		}
		if rsa.VerifyPKCS1v15(pub, h, sum, sig) == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: SNS signature does not match a valid signing certificate", ErrSignature)
}

// fetch returns the certificate at u, from the cache or over HTTPS.
func (c *snsCerts) fetch(ctx context.Context, u string) (*x509.Certificate, error) {
	p, err := snsCertURL(u)
	if err != nil {
		return nil, fmt.Errorf("%w: SigningCertURL: %v", ErrSignature, err)
	}
	key := p.String()
	c.mu.Lock()
	cert := c.cache[key]
	c.mu.Unlock()
	if cert != nil {
		return cert, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, key, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: SigningCertURL: %v", ErrSignature, err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		// Not ErrSignature: the message may be genuine and SNS retries.
		return nil, fmt.Errorf("%w: fetch the SNS signing certificate: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: fetch the SNS signing certificate: %s", ErrUnavailable, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxCertSize))
	if err != nil {
		return nil, fmt.Errorf("%w: fetch the SNS signing certificate: %v", ErrUnavailable, err)
	}
	certs, err := parseCertificates(b)
	if err != nil {
		return nil, fmt.Errorf("%w: SigningCertURL: %v", ErrSignature, err)
	}
	c.mu.Lock()
	if c.cache == nil || len(c.cache) >= maxCachedCerts {
		// SNS rotates its certificate rarely: a full cache is old
		// certificates, dropped together.
		c.cache = map[string]*x509.Certificate{}
	}
	c.cache[key] = certs[0]
	c.mu.Unlock()
	return certs[0], nil
}

// parseCertificates reads the PEM certificates in b.
func parseCertificates(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, errors.New("a PEM CERTIFICATE block does not parse")
		}
		if _, ok := cert.PublicKey.(*rsa.PublicKey); !ok {
			return nil, errors.New("a certificate's key is not RSA")
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return certs, nil
}

// confirm returns the Batch.Confirm of a SubscriptionConfirmation: a GET
// of its SubscribeURL, checked to be on an SNS host before Parse returns.
func (c *snsCerts) confirm(m *snsMessage) (func(context.Context) error, error) {
	p, err := snsURL(m.SubscribeURL)
	if err != nil {
		return nil, fmt.Errorf("%w: SubscribeURL: %v", ErrPayload, err)
	}
	u := p.String()
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return fmt.Errorf("confirm the SNS subscription: %w", err)
		}
		resp, err := c.client.Do(req)
		if err != nil {
			return fmt.Errorf("confirm the SNS subscription: %w", err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxCertSize))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("confirm the SNS subscription: %s", resp.Status)
		}
		return nil
	}, nil
}
