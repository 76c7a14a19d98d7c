package digest

import (
	"fmt"
	htmltemplate "html/template"
	"io"
	"strings"
	texttemplate "text/template"
	"text/template/parse"
)

// The HTML part is escaped by html/template's analysis but executed as a
// text/template: html/template calls an escaper through reflection for
// every value it prints (a slice, the boxed value and the result: about
// two thirds of a digest's allocations), while the view's strings can be
// escaped once in Go. NewRenderer parses the HTML template with
// html/template, lets it escape the template (which rewrites the tree and
// places an escaper after every action), checks that every escaper it
// placed is one whose output is escapeHTML's (text, a quoted attribute
// value, RCDATA such as <title>), and removes them: what remains prints
// escaped values (htmlView, or a compiled program that escapes as it
// prints: render_program.go) in exactly those places. A template edit
// that puts a value anywhere else (a URL, a script, a style, an unquoted
// attribute) makes NewRenderer fail instead of printing it wrongly escaped.

// urlEscapers are the escapers html/template places before the attribute
// escaper for a value in a URL attribute (href): a filter of unsafe
// schemes and a normaliser. They are stripped only for the fields listed
// in urlFields, whose values are filtered and normalised in Go
// (visibleURL) the same way, so that escapeHTML is then all that is left.
var urlEscapers = map[string]bool{
	"_html_template_urlfilter":     true,
	"_html_template_urlnormalizer": true,
}

// urlFields are the view's fields printed in a URL attribute.
var urlFields = map[string]bool{"Unsubscribe": true}

// htmlEscapers are the escapers html/template places whose output is
// escapeHTML's: each maps through its htmlReplacementTable.
var htmlEscapers = map[string]bool{
	"_html_template_htmlescaper":   true,
	"_html_template_attrescaper":   true,
	"_html_template_rcdataescaper": true,
}

// htmlReplacer is html/template's htmlReplacementTable.
var htmlReplacer = strings.NewReplacer("\x00", "\uFFFD", `"`, "&#34;", "&", "&amp;", "'", "&#39;", "+", "&#43;", "<", "&lt;", ">", "&gt;")

func escapeHTML(s string) string { return htmlReplacer.Replace(s) }

// parseHTML returns the HTML template src (named name) escaped by
// html/template and stripped of its escapers, as a text/template.
func parseHTML(name, src string) (*texttemplate.Template, error) {
	ht, err := htmltemplate.New(name).Parse(src)
	if err != nil {
		return nil, err
	}
	// Escaping happens on the first execution.
	if err := ht.Execute(io.Discard, &view{}); err != nil {
		return nil, err
	}
	tree := ht.Tree.Copy()
	if err := stripEscapers(tree.Root); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return texttemplate.New(name).AddParseTree(name, tree)
}

// stripEscapers removes html/template's escapers from the actions under n,
// failing on one that escapeHTML does not match.
func stripEscapers(n parse.Node) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := stripEscapers(c); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		url := false
		if f, ok := n.Pipe.Cmds[0].Args[0].(*parse.FieldNode); ok && len(n.Pipe.Cmds[0].Args) == 1 && len(f.Ident) == 1 && urlFields[f.Ident[0]] {
			url = true
		}
		cmds := n.Pipe.Cmds[:0]
		for _, c := range n.Pipe.Cmds {
			id, ok := c.Args[0].(*parse.IdentifierNode)
			switch {
			case ok && htmlEscapers[id.Ident]:
				continue
			case ok && url && urlEscapers[id.Ident]:
				continue
			case ok && strings.HasPrefix(id.Ident, "_html_template_"):
				return fmt.Errorf("line %d: %s prints a value where html/template escapes with %s, which the renderer does not do", n.Line, n, id.Ident)
			}
			cmds = append(cmds, c)
		}
		n.Pipe.Cmds = cmds
	case *parse.IfNode:
		return stripBranch(&n.BranchNode)
	case *parse.RangeNode:
		return stripBranch(&n.BranchNode)
	case *parse.WithNode:
		return stripBranch(&n.BranchNode)
	case *parse.TextNode, *parse.CommentNode, nil:
	default:
		return fmt.Errorf("unexpected %T in the HTML template", n)
	}
	return nil
}

func stripBranch(b *parse.BranchNode) error {
	if err := stripEscapers(b.List); err != nil {
		return err
	}
	return stripEscapers(b.ElseList)
}

// htmlView returns v with every string the HTML template may print
// escaped as html/template would. Only an HTML template the compiler
// refuses is executed on it: a compiled one escapes each string as it
// prints it (writeEscapedHTML), which builds no escaped copy of the view.
func htmlView(v *view) *view {
	h := *v
	for _, s := range []*string{&h.Subject, &h.Lang, &h.Dir, &h.Start, &h.End, &h.Week, &h.Range, &h.Zone, &h.Unsubscribe, &h.Greeting, &h.Type, &h.Version} {
		*s = escapeHTML(*s)
	}
	t := &h.T
	for _, s := range []*string{&t.Subject, &t.Heading, &t.Intro, &t.IntroEmpty, &t.IntroHTML, &t.EmptyHTML, &t.Date, &t.Activity, &t.Amount, &t.Totals, &t.Currency,
		&t.MoneyIn, &t.MoneyOut, &t.Net, &t.MoneyInPadded, &t.MoneyOutPadded, &t.NetPadded, &t.ListSep, &t.Unsubscribe, &t.UnsubscribeLabel, &t.Footer} {
		*s = escapeHTML(*s)
	}
	h.Rows = make([]viewRow, len(v.Rows))
	for i, r := range v.Rows {
		r.Date, r.Kind, r.Description, r.Amount, r.AmountPadded = escapeHTML(r.Date), escapeHTML(r.Kind), escapeHTML(r.Description), escapeHTML(r.Amount), escapeHTML(r.AmountPadded)
		h.Rows[i] = r
	}
	h.Totals = make([]viewTotal, len(v.Totals))
	for i, t := range v.Totals {
		t.Currency, t.Transactions, t.Credits, t.Debits, t.Net = escapeHTML(t.Currency), escapeHTML(t.Transactions), escapeHTML(t.Credits), escapeHTML(t.Debits), escapeHTML(t.Net)
		h.Totals[i] = t
	}
	return &h
}

// visibleURL returns the unsubscribe URI as the body links it: an http or
// https URI, normalised as html/template's URL normaliser does (bytes
// other than unreserved, reserved and '%' percent-encoded), so that the
// HTML part needs only escapeHTML on top; "" for another scheme (mailto:
// stays in the header only) or none.
func visibleURL(uri string) string {
	scheme, _, ok := strings.Cut(uri, ":")
	if !ok || !strings.EqualFold(scheme, "https") && !strings.EqualFold(scheme, "http") {
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(uri); i++ {
		c := uri[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			strings.IndexByte("-._~!#$&*+,/:;=?@[]%", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02x", c)
		}
	}
	return b.String()
}
