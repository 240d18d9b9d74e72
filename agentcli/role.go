package agentcli

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/gqlws"
)

// rolePoll is how often the agent asks the relay whether it is the
// primary listener of its Endpoints: a change (the primary left) shows
// within this long.
const rolePoll = time.Second

// roleOpPrefix starts the IDs of role queries: "role-<i>-<n>" for the
// i-th Endpoint's n-th query.
const roleOpPrefix = "role-"

// roleLoop asks for this agent's role on each Endpoint until ctx ends.
func (s *session) roleLoop(ctx context.Context) {
	t := time.NewTicker(rolePoll)
	defer t.Stop()
	for n := 0; ; n++ {
		for i := range s.a.routes {
			sv := s.served[subscriptionID(i)]
			id := roleOpPrefix + strconv.Itoa(i) + "-" + strconv.Itoa(n)
			if s.subscribe(id, roleQuery, map[string]any{"e": sv.info.ID}) != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// roleAnswer reports the role a role query's answer tells, when it is the
// first or differs from the last one reported.
func (s *session) roleAnswer(m wsMessage) {
	if m.Type != gqlws.Next || m.next == nil || m.next.Data.Endpoint == nil {
		return // its complete, or an error: the next query asks again
	}
	rest := strings.TrimPrefix(m.ID, roleOpPrefix)
	i, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, '-'), 0)])
	if err != nil {
		return
	}
	sv, ok := s.served[subscriptionID(i)]
	if !ok {
		return
	}
	ls := m.next.Data.Endpoint.Listeners
	mine, primary := false, false
	for _, l := range ls {
		if l.Mine {
			mine, primary = true, primary || l.Primary
		}
	}
	if !mine {
		return // not attached yet
	}
	s.roleMu.Lock()
	if s.roles == nil {
		s.roles = map[int]bool{}
	}
	was, known := s.roles[i]
	s.roles[i] = primary
	s.roleMu.Unlock()
	if known && was == primary {
		return
	}
	if o, ok := s.a.obs.(RoleObserver); ok {
		o.Role(RoleEvent{EndpointID: sv.info.ID, Name: sv.info.Name, Primary: primary, Listeners: len(ls), Changed: known})
	}
}

// FilterInputs are filters as the API's FilterInput.
func FilterInputs(fs []domain.Filter) []map[string]any {
	out := make([]map[string]any, 0, len(fs))
	for _, f := range fs {
		in := map[string]any{"kind": strings.ToUpper(string(f.Kind)), "values": f.Values}
		if f.Name != "" {
			in["name"] = f.Name
		}
		out = append(out, in)
	}
	return out
}
