package e2e

import (
	"testing"

	"github.com/weeklydigest/digest/internal/e2etest"
)

func TestMain(m *testing.M) { e2etest.Main(m) }
