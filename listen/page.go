package listen

import (
	"html/template"
	"net/http"

	"golang.org/x/text/language"

	"github.com/weeklydigest/digest/digest"
)

// pageText is the words of the unsubscribe pages in one language.
type pageText struct {
	Title, Lead, Button string // the GET page
	DoneTitle, Done     string // after the POST
	Invalid             string // a bad link
}

// pageTexts are the page's words in every language of the digests
// (digest.Languages); TestPageTextsComplete keeps them complete.
var pageTexts = map[language.Tag]pageText{
	language.English: {
		Title: "Unsubscribe from the weekly digest", Lead: "Press the button to stop receiving the weekly email about your account activity.",
		Button: "Unsubscribe", DoneTitle: "You are unsubscribed", Done: "You will not receive the weekly email about your account activity any more.",
		Invalid: "This unsubscribe link is not valid.",
	},
	language.German: {
		Title: "Wöchentliche Übersicht abbestellen", Lead: "Klicken Sie auf die Schaltfläche, um die wöchentliche E-Mail zu Ihren Kontobewegungen nicht mehr zu erhalten.",
		Button: "Abbestellen", DoneTitle: "Sie haben die Übersicht abbestellt", Done: "Sie erhalten die wöchentliche E-Mail zu Ihren Kontobewegungen nicht mehr.",
		Invalid: "Dieser Abmeldelink ist ungültig.",
	},
	language.French: {
		Title: "Se désabonner du récapitulatif hebdomadaire", Lead: "Cliquez sur le bouton pour ne plus recevoir l’e-mail hebdomadaire sur l’activité de votre compte.",
		Button: "Se désabonner", DoneTitle: "Vous êtes désabonné", Done: "Vous ne recevrez plus l’e-mail hebdomadaire sur l’activité de votre compte.",
		Invalid: "Ce lien de désabonnement n’est pas valide.",
	},
	language.Spanish: {
		Title: "Darse de baja del resumen semanal", Lead: "Pulse el botón para dejar de recibir el correo semanal con la actividad de su cuenta.",
		Button: "Darse de baja", DoneTitle: "Se ha dado de baja", Done: "Ya no recibirá el correo semanal con la actividad de su cuenta.",
		Invalid: "Este enlace para darse de baja no es válido.",
	},
	language.Japanese: {
		Title: "週間ダイジェストの配信停止", Lead: "ボタンを押すと、口座取引の週間メールの配信を停止します。",
		Button: "配信を停止する", DoneTitle: "配信を停止しました", Done: "今後、口座取引の週間メールは届きません。",
		Invalid: "この配信停止リンクは無効です。",
	},
	language.Arabic: {
		Title: "إلغاء الاشتراك في الملخص الأسبوعي", Lead: "اضغط على الزر لإيقاف رسالة نشاط حسابك الأسبوعية.",
		Button: "إلغاء الاشتراك", DoneTitle: "تم إلغاء اشتراكك", Done: "لن تصلك بعد الآن رسالة نشاط حسابك الأسبوعية.",
		Invalid: "رابط إلغاء الاشتراك هذا غير صالح.",
	},
}

// rtl are the languages written right to left.
var rtl = map[language.Tag]bool{language.Arabic: true}

var pageMatcher = language.NewMatcher(digest.Languages)

// pageLanguage picks the page's language from Accept-Language: the
// closest of the digests' languages, English when none is close.
func pageLanguage(r *http.Request) language.Tag {
	accept := r.Header.Get("Accept-Language")
	if len(accept) > 512 {
		accept = accept[:512] // a header that long is not a browser's
	}
	tags, _, err := language.ParseAcceptLanguage(accept)
	if err != nil || len(tags) == 0 {
		return language.English
	}
	_, i, conf := pageMatcher.Match(tags...)
	if conf == language.No {
		return language.English
	}
	return digest.Languages[i]
}

// pageView is what the page template shows.
type pageView struct {
	Lang, Dir string
	Text      pageText
	Form      bool // the unsubscribe button
	Done      bool // after the POST
}

func newPageView(lang language.Tag) pageView {
	dir := "ltr"
	if rtl[lang] {
		dir = "rtl"
	}
	return pageView{Lang: lang.String(), Dir: dir, Text: pageTexts[lang]}
}

// page is the one HTML page of the service: the button (GET), the
// confirmation (POST) or a bad link. The form posts to the page's own URL
// (action="") with the RFC 8058 body, so it works without JavaScript and
// the button's text is its accessible name.
var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="{{.Lang}}" dir="{{.Dir}}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
{{- if .Done}}
<title>{{.Text.DoneTitle}}</title>
{{- else}}
<title>{{.Text.Title}}</title>
{{- end}}
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;line-height:1.5}button{font:inherit;padding:.6rem 1.2rem}</style>
</head>
<body>
<main>
{{- if .Done}}
<h1>{{.Text.DoneTitle}}</h1>
<p>{{.Text.Done}}</p>
{{- else if .Form}}
<h1 id="title">{{.Text.Title}}</h1>
<form method="post" action="" aria-labelledby="title">
<p id="lead">{{.Text.Lead}}</p>
<input type="hidden" name="List-Unsubscribe" value="One-Click">
<button type="submit" id="unsubscribe" aria-describedby="lead">{{.Text.Button}}</button>
</form>
{{- else}}
<h1>{{.Text.Invalid}}</h1>
{{- end}}
</main>
</body>
</html>
`))
