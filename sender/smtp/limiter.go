package smtp

import (
	"errors"
	"fmt"
	"math"

	"golang.org/x/time/rate"
)

// ErrRate is wrapped by NewLimiter's errors.
var ErrRate = errors.New("invalid send rate")

// NewLimiter returns the process's one send limiter: perSecond messages per
// second on average, at most burst at once. Create it once in main and give
// the same limiter to every mailer, so that all connections and workers
// share one budget: in any one-second window at most perSecond+burst
// messages start. perSecond 0 means unlimited (rate.Inf).
func NewLimiter(perSecond float64, burst int) (*rate.Limiter, error) {
	switch {
	case math.IsNaN(perSecond) || perSecond < 0:
		return nil, fmt.Errorf("%w: rate %v must be >= 0 (0 = unlimited)", ErrRate, perSecond)
	case perSecond == 0 || math.IsInf(perSecond, 1):
		return rate.NewLimiter(rate.Inf, 0), nil
	case burst < 1:
		return nil, fmt.Errorf("%w: burst %d must be >= 1", ErrRate, burst)
	}
	return rate.NewLimiter(rate.Limit(perSecond), burst), nil
}
