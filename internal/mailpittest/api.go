package mailpittest

import (
	"context"
	"net/url"
)

// GetJSON decodes the JSON reply of any GET on Mailpit's API, path
// starting with /api/v1/, for what the typed helpers do not cover.
func (s *Server) GetJSON(ctx context.Context, path string, v any) error {
	return s.getJSON(ctx, path, v)
}

// Search returns the ids of the messages a Mailpit search query finds
// (e.g. "tag:dk-k1-…"), newest first: the tests of the SMTP adapter find
// what they sent by its tag without the look-up adapter.
func (s *Server) Search(ctx context.Context, query string) ([]string, error) {
	var out struct {
		Messages []struct {
			ID string `json:"ID"`
		} `json:"messages"`
	}
	if err := s.getJSON(ctx, "/api/v1/search?"+url.Values{"query": {query}}.Encode(), &out); err != nil {
		return nil, err
	}
	ids := make([]string, len(out.Messages))
	for i, m := range out.Messages {
		ids[i] = m.ID
	}
	return ids, nil
}
