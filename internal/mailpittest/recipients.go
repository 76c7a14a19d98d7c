package mailpittest

import (
	"context"
	"fmt"
)

// Recipients returns the To address of every stored message, paging
// through Mailpit's message list, one entry per message (so a customer who
// got two messages appears twice).
func (s *Server) Recipients(ctx context.Context) ([]string, error) {
	const page = 500
	var out []string
	for start := 0; ; start += page {
		var res struct {
			Total    int `json:"total"`
			Messages []struct {
				To []struct {
					Address string `json:"Address"`
				} `json:"To"`
			} `json:"messages"`
		}
		if err := s.getJSON(ctx, fmt.Sprintf("/api/v1/messages?start=%d&limit=%d", start, page), &res); err != nil {
			return nil, err
		}
		for _, m := range res.Messages {
			for _, to := range m.To {
				out = append(out, to.Address)
			}
		}
		if len(res.Messages) < page {
			return out, nil
		}
	}
}
