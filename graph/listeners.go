package graph

import (
	"context"
	"strings"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/model"
)

// listeners are the sessions of an Endpoint on every relay node;
// mine marks those of the asking connection.
func (r *Resolver) listeners(ctx context.Context, endpointID string) []*model.Listener {
	conn := connectionID(ctx)
	out := []*model.Listener{}
	for _, l := range r.Hub.Listeners(endpointID) {
		c, _, _ := strings.Cut(l.AgentID, "/")
		out = append(out, &model.Listener{AgentID: l.AgentID, Target: l.Target, Primary: l.IsPrimary,
			ConnectedAt: l.ConnectedAt, Node: l.Node, Filters: toFilters(l.Filters), Mine: conn != "" && c == conn})
	}
	return out
}

func toFilters(fs []domain.Filter) []*model.Filter {
	out := make([]*model.Filter, 0, len(fs))
	for _, f := range fs {
		out = append(out, &model.Filter{Kind: model.FilterKind(strings.ToUpper(string(f.Kind))), Name: optional(f.Name),
			Values: f.Values, Text: f.String()})
	}
	return out
}

// toDomainFilters are filters given as structures, unchecked (the domain
// checks an Endpoint's settings).
func toDomainFilters(in []*model.FilterInput) []domain.Filter {
	fs := make([]domain.Filter, 0, len(in))
	for _, f := range in {
		fs = append(fs, domain.Filter{Kind: domain.FilterKind(strings.ToLower(string(f.Kind))), Name: deref(f.Name), Values: f.Values})
	}
	return fs
}

// filtersOf are an input's filters, given as structures or in their text
// form (not both); set is false when neither was given.
func filtersOf(structs []*model.FilterInput, texts []string) (fs []domain.Filter, set bool, err error) {
	switch {
	case structs != nil && texts != nil:
		return nil, false, &domain.InvalidInputError{Field: "filterTexts", Reason: "give filters or filterTexts, not both"}
	case texts != nil:
		fs, err := domain.ParseFilters(texts)
		if err != nil {
			return nil, false, err
		}
		return append([]domain.Filter{}, fs...), true, nil
	case structs != nil:
		return toDomainFilters(structs), true, nil
	}
	return nil, false, nil
}

// fromFilterInputs checks filters given as structures; an invalid one is
// INVALID_INPUT naming it.
func fromFilterInputs(in []*model.FilterInput) ([]domain.Filter, error) {
	fs := toDomainFilters(in)
	if err := domain.ValidateFilters(fs); err != nil {
		return nil, err
	}
	return fs, nil
}
