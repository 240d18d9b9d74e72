package graph

import (
	"strings"

	"github.com/relayhq/relay/domain"
)

// activityText puts an activity entry in words, as people read a team's
// history ("bob joined as member"), once here for every client. by is the
// login of who made the change (nil: a token without a member, or one
// since removed); subject the login of the member it is about, when it is
// one still there; detail what the event says (a role, a name, a login).
func activityText(typ string, by *string, subject, detail string) string {
	who := "A token without a member"
	if by != nil {
		who = *by
	}
	member := subject
	if member == "" {
		member = "a former member"
	}
	role := strings.ToLower(detail)
	switch typ {
	case domain.TypeMemberJoined:
		// detail: "login (ROLE)"
		login, r, ok := strings.Cut(detail, " (")
		if !ok {
			return detail + " joined"
		}
		return login + " joined as " + strings.ToLower(strings.TrimSuffix(r, ")"))
	case domain.TypeMemberRemoved:
		return who + " removed " + member
	case domain.TypeMemberRoleChanged:
		return who + " made " + member + " " + article(role) + role
	case domain.TypeMemberPasswordChanged:
		return who + " changed their password"
	case domain.TypeMemberInvited:
		return who + " created a link to join as " + role
	case domain.TypeMemberInviteUsed:
		return who + " used a link to join"
	case domain.TypeTokenIssued:
		return who + " created token " + quoteName(detail)
	case domain.TypeTokenRevoked:
		return who + " revoked token " + quoteName(detail)
	case domain.TypeEndpointCreated:
		return who + " created Endpoint " + quoteName(detail)
	case domain.TypeEndpointReconfigured:
		return who + " changed Endpoint " + quoteName(detail)
	case domain.TypeEndpointDeleted:
		return who + " deleted an Endpoint"
	}
	return who + ": " + typ
}

func article(role string) string {
	if strings.HasPrefix(role, "o") {
		return "an "
	}
	return "a "
}

// quoteName names a token or an Endpoint, or says it had none.
func quoteName(name string) string {
	if name == "" {
		return "(no name)"
	}
	return name
}
