package digest

import (
	"bytes"
	"fmt"
)

// DiffPrograms renders d as Render does, once with the renderer's compiled
// programs and once with text/template executing the same trees, and
// reports the first template whose outputs differ (or that did not
// compile). For the differential test over the golden customers, which
// needs package snapshot (and so lives in package digest_test).
func DiffPrograms(r *Renderer, d *Digest) error {
	t, ok := r.types[d.Identity.Type]
	if !ok {
		return ErrUnknownType
	}
	v, err := r.newView(d)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		c    compiledTemplate
	}{{"subject", t.subject}, {"text", t.text}, {"html", t.html}} {
		if c.c.prog == nil {
			return fmt.Errorf("%s: not compiled", c.name)
		}
		var got, want bytes.Buffer
		var f frame
		c.c.prog.execute(&got, &f, v)
		data := v
		if c.c.html {
			data = htmlView(v)
		}
		if err := c.c.tmpl.Execute(&want, data); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			return fmt.Errorf("%s: the program printed\n%s\ntext/template printed\n%s", c.name, got.String(), want.String())
		}
		if c.name == "subject" {
			v.Subject = clean(got.String()) // as Render does, for the HTML title
		}
	}
	return nil
}
