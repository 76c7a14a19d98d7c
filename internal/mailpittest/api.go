package mailpittest

import "context"

// GetJSON decodes the JSON reply of any GET on Mailpit's API, path
// starting with /api/v1/, for what the typed helpers do not cover.
func (s *Server) GetJSON(ctx context.Context, path string, v any) error {
	return s.getJSON(ctx, path, v)
}
