package graph

import (
	"context"
	"strconv"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/readmodel"
)

// events pages through the log in order (see commands.EventPages): the
// operator (admin token) reads all of it, an account the events of its own
// streams.
func (r *Resolver) events(ctx context.Context, after string, first int) (*model.EventConnection, error) {
	var from uint64
	if after != "" {
		p, err := strconv.ParseUint(after, 10, 64)
		if err != nil {
			return nil, &domain.InvalidInputError{Field: "after", Reason: "must be an event position"}
		}
		from = p
	}
	switch {
	case first < 0:
		return nil, &domain.InvalidInputError{Field: "first", Reason: "must not be negative"}
	case first == 0:
		first = DefaultPageSize
	case first > MaxPageSize:
		first = MaxPageSize
	}
	pages := commands.EventPages{Log: r.Log, Index: r.Views}
	var (
		page commands.EventPage
		err  error
	)
	if r.isAdmin(ctx) {
		page, err = pages.All(ctx, from, first)
	} else {
		// The account's log (who joined, who changed what) is an
		// owner's to audit, not every member's. No answer holds a
		// password hash, plain or sealed: see toEvent.
		var acc readmodel.Account
		if acc, _, err = r.owner(ctx); err == nil {
			page, err = pages.OfAccount(ctx, acc.ID, from, first)
		}
	}
	if err != nil {
		return nil, err
	}
	conn := &model.EventConnection{PageInfo: &model.PageInfo{HasNextPage: page.More}, Edges: []*model.EventEdge{}, Nodes: []*model.Event{}}
	for _, e := range page.Events {
		n := toEvent(e)
		conn.Edges = append(conn.Edges, &model.EventEdge{Cursor: n.Position, Node: n})
		conn.Nodes = append(conn.Nodes, n)
	}
	if evs := page.Events; len(evs) > 0 {
		end := strconv.FormatUint(evs[len(evs)-1].Position, 10)
		conn.PageInfo.EndCursor = &end
	}
	return conn, nil
}
