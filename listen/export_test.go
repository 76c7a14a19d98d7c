package listen

import (
	"golang.org/x/text/language"
)

// PageLanguage and HasPageText expose the page's languages to the tests.
var PageLanguage = pageLanguage

func HasPageText(lang language.Tag) bool {
	t, ok := pageTexts[lang]
	return ok && t.Title != "" && t.Lead != "" && t.Button != "" && t.DoneTitle != "" && t.Done != "" && t.Invalid != ""
}
