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

// attachPoll is how soon the agent first asks again whether the relay has
// attached its sessions, doubling up to rolePoll: the Connected state
// waits for that (see session.announce).
const attachPoll = 10 * time.Millisecond

// attachWait bounds that wait: a relay that has not said by then is
// announced as connected anyway.
const attachWait = 5 * time.Second

// roleOpPrefix starts the IDs of role queries: "role-<i>-<n>" for the
// i-th Endpoint's n-th query.
const roleOpPrefix = "role-"

// roleLoop asks for this agent's role on each Endpoint: quickly until the
// relay lists every session, then, with Options.Roles, every rolePoll
// until ctx ends.
func (s *session) roleLoop(ctx context.Context) {
	wait := attachPoll
	t := time.NewTimer(0)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.a.opts.Roles && s.allAttached() {
			return // the Connected state was all it waited for
		}
		for i := range s.a.routes {
			sv := s.served[subscriptionID(i)]
			id := roleOpPrefix + strconv.Itoa(i) + "-" + strconv.Itoa(n)
			if s.subscribe(id, roleQuery, map[string]any{"e": sv.info.ID}) != nil {
				return
			}
		}
		if s.allAttached() {
			wait = rolePoll
		} else {
			wait = min(2*wait, rolePoll)
		}
		t.Reset(wait)
	}
}

// servedBy notes that the relay serves this agent on sv's Endpoint (it
// lists the session, or sent a forward on it) and announces the agent once
// it does on every one: a forward can come before the role query's answer
// says so, and its line should not come before the public URL's.
func (s *session) servedBy(sv *served) {
	if s.connected.Load() {
		return // every forward after the announcement: no lock
	}
	s.roleMu.Lock()
	s.markAttachedLocked(sv.index)
	all := len(s.attached) == len(s.a.routes)
	s.roleMu.Unlock()
	if all {
		s.announce()
	}
}

// markAttachedLocked notes the i-th Endpoint's session as attached;
// roleMu is held.
func (s *session) markAttachedLocked(i int) {
	if s.attached == nil {
		s.attached = map[int]bool{}
	}
	s.attached[i] = true
}

func (s *session) allAttached() bool {
	s.roleMu.Lock()
	defer s.roleMu.Unlock()
	return len(s.attached) == len(s.a.routes)
}

// roleAnswer notes that the relay lists this agent as a listener (once it
// lists every session, the agent is announced as connected) and reports
// the role the answer tells, when it is the first or differs from the last
// one reported.
func (s *session) roleAnswer(m wsMessage) {
	if m.Type == gqlws.Error {
		s.announce() // a relay that cannot tell: waiting longer gains nothing
		return
	}
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
	if !s.a.opts.Roles {
		// Without Roles the role is neither told nor kept: no later
		// answer would keep it up to date.
		s.servedBy(sv)
		return
	}
	s.roleMu.Lock()
	if s.roles == nil {
		s.roles = map[int]bool{}
	}
	s.markAttachedLocked(i)
	if len(s.attached) < len(s.a.routes) {
		// Roles are told after the connection, which waits for every
		// session: the next answer about this one tells its role.
		s.roleMu.Unlock()
		return
	}
	was, known := s.roles[i]
	s.roles[i] = primary
	s.roleMu.Unlock()
	s.announce()
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
