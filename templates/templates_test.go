package templates

import (
	"io/fs"
	"testing"
)

func TestEveryTypeHasThreeTemplates(t *testing.T) {
	t.Parallel()
	subjects, err := fs.Glob(FS, "*"+SubjectSuffix)
	if err != nil || len(subjects) == 0 {
		t.Fatalf("no subject templates: %v", err)
	}
	for _, s := range subjects {
		typ := s[:len(s)-len(SubjectSuffix)]
		for _, name := range []string{Subject(typ), Text(typ), HTML(typ)} {
			if b, err := fs.ReadFile(FS, name); err != nil || len(b) == 0 {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	if _, err := fs.Stat(FS, HTML("weekly_activity")); err != nil {
		t.Error(err)
	}
}
