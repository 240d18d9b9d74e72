package graph

import (
	"testing"

	"github.com/relayhq/relay/domain"
)

func TestActivityText(t *testing.T) {
	alice := "alice"
	for _, tc := range []struct {
		typ             string
		by              *string
		subject, detail string
		want            string
	}{
		{domain.TypeMemberJoined, nil, "", "Bob (MEMBER)", "Bob joined as member"},
		{domain.TypeMemberJoined, &alice, "bob", "bob (OWNER)", "bob joined as owner"},
		{domain.TypeMemberRemoved, &alice, "", "", "alice removed a former member"},
		{domain.TypeMemberRoleChanged, &alice, "bob", "OWNER", "alice made bob an owner"},
		{domain.TypeMemberRoleChanged, &alice, "bob", "MEMBER", "alice made bob a member"},
		{domain.TypeMemberInvited, &alice, "", "MEMBER", "alice created a link to join as member"},
		{domain.TypeTokenIssued, nil, "", "ci", "A token without a member created token ci"},
		{domain.TypeTokenRevoked, &alice, "", "ci", "alice revoked token ci"},
		{domain.TypeEndpointCreated, &alice, "", "stripe", "alice created Endpoint stripe"},
		{domain.TypeEndpointDeleted, &alice, "", "", "alice deleted an Endpoint"},
		{"something.new.v1", &alice, "", "", "alice: something.new.v1"},
	} {
		if got := activityText(tc.typ, tc.by, tc.subject, tc.detail); got != tc.want {
			t.Errorf("%s %q: %q, want %q", tc.typ, tc.detail, got, tc.want)
		}
	}
}
