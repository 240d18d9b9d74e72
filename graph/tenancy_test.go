package graph_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/graph/generated"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/projections"
	"github.com/relayhq/relay/ratelimit"
)

// The schema-driven tenancy test. Every root field of the schema, and
// every field with arguments, has a row in the table below saying who may
// call it; every argument that names an object (see referenceArgs for the
// rule) has a probe: other accounts call the field with account A's real
// values, then with unknown ones of the same form, and the two answers
// must read alike, hold nothing of A's, and change nothing of A's.
// Owner-only and operator-only fields are called by A's own member (and
// owner) and refused. A caller without a token makes the probes too: it is
// refused UNAUTHENTICATED, alike for A's values and unknown ones, unless
// anyone may call the field. A field added to the schema without a row, or an
// argument without a probe, fails TestSchemaTenancy/table.

// access is who may call a field.
type access int

const (
	anyone   access = iota // no account needed (guest inspectors, sign-up and sign-in, device polls)
	member                 // any member of the account, or a token without a member
	owner                  // owners only: FORBIDDEN for a member (docs/accounts.md, Members and roles)
	operator               // the --admin-token only: UNAUTHENTICATED for any account's token
)

// match is how the answer to a value of A's must compare with the answer
// to an unknown value.
type match int

const (
	// same: the whole answer (data and errors), once the value given is
	// blanked in each, as systemtest's sameRefusal does.
	same match = iota
	// sameCode: the same code and field. For values that are capabilities
	// of the device flow: a user code says why it cannot be used (expired,
	// used, unknown) to whoever holds it, and names nothing of an account.
	sameCode
	// noLeak: not compared. The value is no object of A's (a cursor is a
	// position in the log; a device code is the device's own secret): the
	// answer must only hold nothing of A's.
	noLeak
)

// refused is a probe's want for "any refusal, no data".
const refused = "*"

// probe is one call of a field.
type probe struct {
	// arg is the argument path the value fills ("id", "input.attemptId");
	// "" for a call without a value (a role's refusal, a plain read).
	arg string
	// query is the operation; $v is the value.
	query string
	// vars are the other variables (nil: none).
	vars func(w *world) map[string]any
	// values are A's values to try (each against an unknown one of the same form).
	values func(w *world) []string
	// as is who calls: the callers of other accounts unless set.
	as func(w *world) caller
	// want is the refusal code, "" for an answer with data, refused for any refusal.
	want  string
	match match
	// holds is what the answer must hold (proof that a probe expected to
	// answer read something); hides what it must not hold besides A's marks.
	holds, hides func(w *world) []string
	// nudge, for a subscription expected to answer: a delivery of B's is
	// recorded once it is started, and its messages are read until that one.
	nudge bool
	// anonymous is the want when no token is given: "" takes the field's
	// (UNAUTHENTICATED unless anyone may call it, then want). A probe
	// with anonymousOnly is made by the caller without a token alone.
	anonymous     string
	anonymousOnly bool
}

// rule is a field's row: who may call it and its probes.
type rule struct {
	access access
	probes []probe
	// capability names reference arguments that are not probed, and why.
	capability map[string]string
}

// valueArgs are the String arguments and input fields that carry a value
// the caller writes (a name, a password, a duration, a body, a filter),
// never a pointer to something stored. Every other String, and every ID,
// names an object (referenceArgs). Keyed as Type.field(arg) for an
// argument and Input.field for an input field.
var valueArgs = map[string]bool{
	// Names, logins, passwords and lifetimes of new things.
	"Mutation.signUp(name)": true, "Mutation.signUpWithPassword(name)": true, "Mutation.signUpWithPassword(login)": true,
	"Mutation.signUpWithPassword(password)": true, "Mutation.signIn(login)": true, "Mutation.signIn(password)": true,
	"Mutation.changePassword(currentPassword)": true, "Mutation.changePassword(newPassword)": true,
	"Mutation.setUpSignIn(login)": true, "Mutation.setUpSignIn(password)": true, "Mutation.joinAccount(login)": true,
	"Mutation.joinAccount(password)": true, "Mutation.createAccount(name)": true, "Mutation.createToken(name)": true,
	"Mutation.createToken(expiresIn)": true, "Mutation.createInvite(expiresIn)": true, "Mutation.createMemberInvite(expiresIn)": true,
	"Mutation.requestDeviceCode(clientName)": true,
	// Quotas, a queue state, an agent's own target.
	"Mutation.setAccountQuota(storage)": true, "Mutation.setAccountQuota(rate)": true, "Mutation.setAccountQuota(apiCost)": true,
	"Query.queuedDeliveries(state)": true, "Subscription.forwardRequests(target)": true,
	// Endpoint settings.
	"CreateEndpointInput.name": true, "CreateEndpointInput.target": true, "CreateEndpointInput.filterTexts": true,
	"CreateEndpointInput.retention": true, "UpdateEndpointInput.name": true, "UpdateEndpointInput.target": true,
	"UpdateEndpointInput.filterTexts": true, "UpdateEndpointInput.retention": true,
	"QueuePolicyInput.retryOn": true, "QueuePolicyInput.backoffBase": true, "QueuePolicyInput.backoffCap": true,
	"QueuePolicyInput.maxAge": true, "FilterInput.name": true, "FilterInput.values": true,
	"AnswerInput.body": true, "AnswerInput.bodyBase64": true, "HeaderInput.name": true, "HeaderInput.value": true,
	"HeaderInput.valueBase64": true, "HandshakesInput.metaVerifyToken": true, "HandshakesInput.zoomSecret": true,
	// An agent's answer and a retry's edit.
	"CompleteForwardInput.bodyBase64": true, "CompleteForwardInput.error": true, "CompleteForwardInput.failure": true,
	"CompleteForwardInput.signature": true, "FidelityReceiptInput.requestLine": true, "FidelityReceiptInput.headers": true,
	"FidelityReceiptInput.body": true, "RequestEditInput.method": true, "RequestEditInput.path": true,
	"RequestEditInput.unsetHeaders": true, "RequestEditInput.body": true, "RequestEditInput.bodyBase64": true,
	// What a history search matches, within the address being read
	// (providerDeliveryId is the provider's id, not one of the relay's).
	"DeliveryFilter.method": true, "DeliveryFilter.path": true, "DeliveryFilter.pathPrefix": true,
	"DeliveryFilter.header": true, "DeliveryFilter.headerValue": true, "DeliveryFilter.bodyContains": true,
	"DeliveryFilter.providerEvent": true, "DeliveryFilter.providerDeliveryId": true,
}

// referenceArgs are the paths of a field's arguments that name an object:
// every argument or input field (through nested inputs) of type ID, and
// every one of type String that valueArgs does not list. The keys of
// valueArgs it meets are set in values.
func referenceArgs(s *ast.Schema, typ string, f *ast.FieldDefinition, values map[string]bool) []string {
	var out []string
	var walk func(path, key string, t *ast.Type, seen map[string]bool)
	walk = func(path, key string, t *ast.Type, seen map[string]bool) {
		switch name := t.Name(); {
		case name == "String" && valueArgs[key]:
			values[key] = true
		case name == "ID" || name == "String":
			out = append(out, path)
		case s.Types[name] != nil && s.Types[name].Kind == ast.InputObject && !seen[name]:
			seen[name] = true
			for _, in := range s.Types[name].Fields {
				walk(path+"."+in.Name, name+"."+in.Name, in.Type, seen)
			}
			delete(seen, name)
		}
	}
	for _, a := range f.Arguments {
		walk(a.Name, typ+"."+f.Name+"("+a.Name+")", a.Type, map[string]bool{})
	}
	return out
}

// world is account A, the accounts B and C that probe it, and what the
// probes need of them.
type world struct {
	t   *testing.T
	e   *env
	url string

	ann, amy, bert string // bearer tokens: A's owner and member sessions, B's owner session
	carl           string // the token account C was signed up with: no member, an owner's rights
	a              alpha
	b              bravo
	marks          []string // what no answer to another account may hold
	aIDs           []string // the ids of A's objects, of every kind

	peers   int          // the client addresses calls came from
	agent   *agentSocket // A's agent on its PROXY Endpoint
	retried chan []byte  // the answer to A's retry, once its attempt is answered
}

// alpha is account A: a team of three, three Endpoints with deliveries
// and a deleted one, an agent holding a retry's attempt open, tokens, a
// spent invite and a device it let in.
type alpha struct {
	id, annMember, amyMember, avaMember          string
	apiToken, apiTokenID, annSession, amySession string
	deviceToken, deviceTokenID                   string
	logEp, proxyEp, queueEp                      string
	logDelivery, proxyDelivery                   string
	queuedDelivery, deadDelivery                 string
	attempt                                      string // pending while the probes run
	cursor, position                             string // a delivery's cursor, an event's position
	spentInvite, userCode, deviceCode            string
	agentID, event, smeeURL                      string // its agent session, an event of its log, its smee stream
	goneEp, goneDelivery                         string // a deleted Endpoint and its delivery
}

// bravo is account B, with a guest inspector it knows.
type bravo struct {
	id, logEp, queueEp, delivery string
	inspector, inspectorDelivery string
	logDeliveries                []string
	queueDeliveryDead            string
}

func (w *world) annMembers() []string { return []string{w.a.annMember, w.a.avaMember} }

// The table. Probes run as B unless as says otherwise.
func tenancyTable() map[string]rule {
	asAmy := func(w *world) caller { return caller{name: "A's member", tok: w.amy} }
	asAnn := func(w *world) caller { return caller{name: "A's owner", tok: w.ann} }
	of := func(vs ...func(w *world) string) func(w *world) []string {
		return func(w *world) []string {
			out := make([]string, len(vs))
			for i, v := range vs {
				out[i] = v(w)
			}
			return out
		}
	}
	aEndpoints := func(w *world) []string { return []string{w.a.logEp, w.a.proxyEp, w.a.queueEp} }
	aDeliveries := func(w *world) []string {
		return []string{w.a.logDelivery, w.a.proxyDelivery, w.a.queuedDelivery, w.a.deadDelivery}
	}
	aMembers := func(w *world) []string { return []string{w.a.annMember, w.a.amyMember, w.a.avaMember} }
	aTokens := func(w *world) []string {
		return []string{w.a.apiTokenID, w.a.annSession, w.a.amySession, w.a.deviceTokenID}
	}
	aAccount := of(func(w *world) string { return w.a.id })
	aCursor := of(func(w *world) string { return w.a.cursor })
	bLog := func(w *world) map[string]any { return map[string]any{"e": w.b.logEp} }

	return map[string]rule{
		// Queries.
		"Query.inspector": {access: anyone, probes: []probe{
			// An inspector's address is its capability; an Endpoint's id is
			// no inspector's.
			{arg: "id", query: `query($v: ID!) { inspector(id: $v) { id url answer { status body } } }`, values: aEndpoints},
		}},
		"Query.memberInvite": {access: anyone, probes: []probe{
			{arg: "code", query: `query($v: String!) { memberInvite(code: $v) { accountName role } }`,
				values: of(func(w *world) string { return w.a.spentInvite }), want: "INVALID_INPUT"},
		}},
		"Query.me": {access: anyone, probes: []probe{
			{query: `{ me { id name member { id login } members { id login role } usage { accountId storedBytes deliveries } } }`,
				holds: func(w *world) []string { return []string{w.b.id} }},
		}},
		"Query.accountsUsage": {access: operator, probes: []probe{
			{arg: "account", query: `query($v: ID) { accountsUsage(account: $v) { accountId name storedBytes } }`, values: aAccount, want: "UNAUTHENTICATED"},
			{arg: "account", query: `query($v: ID) { accountsUsage(account: $v) { accountId } }`, values: aAccount, want: "UNAUTHENTICATED", as: asAmy},
			{arg: "account", query: `query($v: ID) { accountsUsage(account: $v) { accountId } }`, values: aAccount, want: "UNAUTHENTICATED", as: asAnn},
		}},
		"Query.tokens": {access: member, probes: []probe{
			{query: `{ tokens { id name member } }`},
			// A member sees their own tokens, not the owner's.
			{query: `{ tokens { id name member } }`, as: asAmy, hides: func(w *world) []string { return []string{w.a.apiTokenID, w.a.annSession} },
				holds: func(w *world) []string { return []string{w.a.amySession} }},
		}},
		"Query.signupMode": {access: anyone},
		"Query.deviceAuthorization": {access: member, probes: []probe{
			{arg: "userCode", query: `query($v: String!) { deviceAuthorization(userCode: $v) { clientName status } }`,
				values: of(func(w *world) string { return w.a.userCode }), want: "INVALID_INPUT", match: sameCode},
		}},
		"Query.endpoints": {access: member, probes: []probe{
			{query: `{ endpoints { id name url listeners { agentId } } }`,
				holds: func(w *world) []string { return []string{w.b.logEp, w.b.queueEp} }},
			// An Endpoint of A's pages B's list no more than an unknown id.
			{arg: "after", query: `query($v: ID) { endpoints(first: 10, after: $v) { id name } }`, values: aEndpoints, want: "INVALID_INPUT"},
		}},
		"Query.endpoint": {access: member, probes: []probe{
			{arg: "id", query: `query($v: ID!) { endpoint(id: $v) { id name deliveries { nodes { id body } } } }`, values: aEndpoints},
		}},
		"Query.queuedDeliveries": {access: member, probes: []probe{
			{arg: "endpoint", query: `query($v: ID!) { queuedDeliveries(endpoint: $v) { delivery { id } queue { state } } }`,
				values: aEndpoints, want: "NOT_FOUND"},
		}},
		"Query.delivery": {access: anyone, probes: []probe{
			{arg: "id", query: `query($v: ID!) { delivery(id: $v) { id body attempts { id status } } }`, values: aDeliveries},
		}},
		"Query.events": {access: owner, probes: []probe{
			// A position names no event of anyone's: the page is B's own log.
			{arg: "after", query: `query($v: String) { events(after: $v, first: 100) { nodes { stream type data } } }`,
				values: of(func(w *world) string { return w.a.position }), match: noLeak},
			{query: `{ events(first: 100) { nodes { stream type data } } }`, holds: func(w *world) []string { return []string{w.b.logEp} }},
			{query: `{ events { nodes { id } } }`, as: asAmy, want: "FORBIDDEN"},
		}},

		// Mutations.
		"Mutation.createInspector": {access: anyone, probes: []probe{
			{query: `mutation { createInspector { id url } }`, anonymousOnly: true},
		}},
		"Mutation.signUp": {access: anyone, capability: map[string]string{
			"invite": "a sign-up invite is made to be handed to a stranger and creates a new account: it names nothing an account holds",
		}, probes: []probe{
			{query: `mutation { signUp(name: "Delta") { account { id name } token } }`, anonymousOnly: true},
		}},
		"Mutation.createInvite": {access: owner, probes: []probe{
			{query: `mutation { createInvite { code } }`, as: asAmy, want: "FORBIDDEN"},
			{query: `mutation { createInvite { code } }`, anonymousOnly: true},
		}},
		"Mutation.signUpWithPassword": {access: anyone, capability: map[string]string{
			"invite": "as signUp's invite",
		}, probes: []probe{
			{query: `mutation { signUpWithPassword(name: "Echo", login: "echo@echo.test", password: "echo's long password") { account { id } member { id } } }`,
				anonymousOnly: true},
		}},
		"Mutation.signIn": {access: anyone, probes: []probe{
			// A's login with a wrong password: refused, nothing of A's.
			{query: `mutation { signIn(login: "ann@alpha.test", password: "not ann's password at all") { account { id } member { id } } }`,
				want: refused, anonymousOnly: true},
		}},
		"Mutation.signOut": {access: anyone},
		"Mutation.changePassword": {access: member, probes: []probe{
			{query: `mutation { changePassword(currentPassword: "ann's long password", newPassword: "a new long password") }`, anonymousOnly: true},
		}},
		"Mutation.setUpSignIn": {access: owner, probes: []probe{
			{query: `mutation { setUpSignIn(login: "amy-again@alpha.test", password: "amy's other long password") { member { id } } }`,
				as: asAmy, want: "FORBIDDEN"},
			{query: `mutation { setUpSignIn(login: "nobody@delta.test", password: "a long password of nobody") { member { id } } }`, anonymousOnly: true},
		}},
		"Mutation.createMemberInvite": {access: owner, probes: []probe{
			{query: `mutation { createMemberInvite(role: OWNER) { code } }`, as: asAmy, want: "FORBIDDEN"},
			{query: `mutation { createMemberInvite(role: OWNER) { code } }`, anonymousOnly: true},
		}},
		"Mutation.joinAccount": {access: anyone, probes: []probe{
			{arg: "code", query: `mutation($v: String!) { joinAccount(code: $v, login: "bert-joins@bravo.test", password: "bert's long password") { account { id } member { id } } }`,
				values: of(func(w *world) string { return w.a.spentInvite }), want: "INVALID_INPUT"},
		}},
		"Mutation.removeMember": {access: owner, probes: []probe{
			{arg: "id", query: `mutation($v: ID!) { removeMember(id: $v) }`, values: aMembers, want: "NOT_FOUND"},
			{arg: "id", query: `mutation($v: ID!) { removeMember(id: $v) }`, values: func(w *world) []string { return w.annMembers() },
				as: asAmy, want: "FORBIDDEN"},
		}},
		"Mutation.changeMemberRole": {access: owner, probes: []probe{
			{arg: "id", query: `mutation($v: ID!) { changeMemberRole(id: $v, role: OWNER) { id role } }`, values: aMembers, want: "NOT_FOUND"},
			// Neither promoting herself nor demoting the owner.
			{arg: "id", query: `mutation($v: ID!) { changeMemberRole(id: $v, role: OWNER) { id role } }`,
				values: of(func(w *world) string { return w.a.amyMember }), as: asAmy, want: "FORBIDDEN"},
			{arg: "id", query: `mutation($v: ID!) { changeMemberRole(id: $v, role: MEMBER) { id role } }`,
				values: func(w *world) []string { return w.annMembers() }, as: asAmy, want: "FORBIDDEN"},
		}},
		"Mutation.createAccount": {access: operator, probes: []probe{
			{query: `mutation { createAccount(name: "Alpha Two") { token } }`, anonymousOnly: true},
			{query: `mutation { createAccount(name: "Alpha Two") { token } }`, as: asAmy, want: "UNAUTHENTICATED"},
			{query: `mutation { createAccount(name: "Alpha Two") { token } }`, as: asAnn, want: "UNAUTHENTICATED"},
		}},
		"Mutation.setAccountQuota": {access: operator, probes: []probe{
			{arg: "account", query: `mutation($v: ID!) { setAccountQuota(account: $v, storage: "1KiB", rate: "1/min") { accountId } }`,
				values: aAccount, want: "UNAUTHENTICATED"},
			{arg: "account", query: `mutation($v: ID!) { setAccountQuota(account: $v, storage: "off") { accountId } }`,
				values: aAccount, as: asAmy, want: "UNAUTHENTICATED"},
			{arg: "account", query: `mutation($v: ID!) { setAccountQuota(account: $v, storage: "off") { accountId } }`,
				values: aAccount, as: asAnn, want: "UNAUTHENTICATED"},
		}},
		"Mutation.createToken": {access: member, probes: []probe{
			{query: `mutation { createToken(name: "ci") { token { id } } }`, anonymousOnly: true},
		}},
		"Mutation.revokeToken": {access: member, probes: []probe{
			{arg: "id", query: `mutation($v: ID!) { revokeToken(id: $v) }`, values: aTokens, want: "NOT_FOUND"},
			// Another member's token reads as unknown to a member too.
			{arg: "id", query: `mutation($v: ID!) { revokeToken(id: $v) }`,
				values: func(w *world) []string { return []string{w.a.apiTokenID, w.a.annSession, w.a.deviceTokenID} }, as: asAmy, want: "NOT_FOUND"},
		}},
		"Mutation.requestDeviceCode": {access: anyone, probes: []probe{
			{query: `mutation { requestDeviceCode(clientName: "a laptop") { userCode } }`, anonymousOnly: true},
		}},
		"Mutation.pollDeviceCode": {access: anyone, probes: []probe{
			{arg: "deviceCode", query: `mutation($v: String!) { pollDeviceCode(deviceCode: $v) { token account { id name } } }`,
				values: of(func(w *world) string { return w.a.deviceCode }), want: refused, match: noLeak},
		}},
		"Mutation.approveDevice": {access: member, probes: []probe{
			{arg: "userCode", query: `mutation($v: String!) { approveDevice(userCode: $v) { clientName status } }`,
				values: of(func(w *world) string { return w.a.userCode }), want: "INVALID_INPUT", match: sameCode},
		}},
		"Mutation.denyDevice": {access: member, probes: []probe{
			{arg: "userCode", query: `mutation($v: String!) { denyDevice(userCode: $v) { clientName status } }`,
				values: of(func(w *world) string { return w.a.userCode }), want: "INVALID_INPUT", match: sameCode},
		}},
		"Mutation.createEndpoint": {access: member, probes: []probe{
			{query: `mutation { createEndpoint(input: {name: "nobody's", mode: LOG}) { id } }`, anonymousOnly: true},
		}},
		"Mutation.updateEndpoint": {access: member, probes: []probe{
			{arg: "id", query: `mutation($v: ID!) { updateEndpoint(id: $v, input: {name: "bravo's now", mode: PROXY, target: "127.0.0.1:9", responseCapture: true}) { id name } }`,
				values: aEndpoints, want: "NOT_FOUND"},
		}},
		"Mutation.deleteEndpoint": {access: member, probes: []probe{
			{arg: "id", query: `mutation($v: ID!) { deleteEndpoint(id: $v) }`, values: aEndpoints, want: "NOT_FOUND"},
		}},
		"Mutation.issueSmeeKey": {access: member, probes: []probe{
			{arg: "endpointId", query: `mutation($v: ID!) { issueSmeeKey(endpointId: $v) { url endpoint { id } } }`, values: aEndpoints, want: "NOT_FOUND"},
		}},
		"Mutation.revokeSmeeKey": {access: member, probes: []probe{
			{arg: "endpointId", query: `mutation($v: ID!) { revokeSmeeKey(endpointId: $v) { id smeeKey } }`, values: aEndpoints, want: "NOT_FOUND"},
		}},
		"Mutation.setInspectorAnswer": {access: anyone, probes: []probe{
			// An inspector's address is its capability; an Endpoint's id is
			// no inspector's.
			{arg: "id", query: `mutation($v: ID!) { setInspectorAnswer(id: $v, answer: {status: 418, body: "bravo"}) { id answer { status } } }`,
				values: aEndpoints, want: "NOT_FOUND"},
		}},
		"Mutation.retryDelivery": {access: member, probes: []probe{
			{arg: "id", query: `mutation($v: ID!) { retryDelivery(id: $v) { id attempts { id status } } }`, values: aDeliveries, want: "NOT_FOUND"},
			{arg: "id", query: `mutation($v: ID!) { retryDelivery(id: $v, edit: {path: "/bravo", body: "bravo"}) { id } }`, values: aDeliveries, want: "NOT_FOUND"},
		}},
		"Mutation.redriveDead": {access: member, probes: []probe{
			{arg: "endpoint", query: `mutation($v: ID!) { redriveDead(endpoint: $v) }`, values: aEndpoints, want: "NOT_FOUND"},
		}},
		"Mutation.redriveDeadPage": {access: member, probes: []probe{
			{arg: "endpoint", query: `mutation($v: ID!) { redriveDeadPage(endpoint: $v) { redriven leftDead endCursor hasNextPage } }`,
				values: aEndpoints, want: "NOT_FOUND"},
			// A cursor is a position: from A's, B's own queue is paged.
			{arg: "after", query: `mutation($e: ID!, $v: String) { redriveDeadPage(endpoint: $e, after: $v) { redriven leftDead endCursor hasNextPage } }`,
				vars: func(w *world) map[string]any { return map[string]any{"e": w.b.queueEp} }, values: aCursor, match: noLeak},
		}},
		"Mutation.completeForward": {access: member, probes: []probe{
			{arg: "input.attemptId", query: `mutation($v: ID!) { completeForward(input: {attemptId: $v, status: 200, bodyBase64: "YnJhdm8="}) }`,
				values: of(func(w *world) string { return w.a.attempt }), want: "NOT_FOUND"},
		}},

		// Subscriptions.
		"Subscription.deliveries": {access: anyone, probes: []probe{
			{arg: "address", query: `subscription($v: ID!) { deliveries(address: $v) { id body } }`, values: aEndpoints, want: "NOT_FOUND"},
			{arg: "since", query: `subscription($e: ID!, $v: String) { deliveries(address: $e, since: $v) { id body } }`,
				vars: bLog, values: aCursor, match: noLeak, nudge: true,
				holds: func(w *world) []string { return w.b.logDeliveries[len(w.b.logDeliveries)-1:] }},
		}},
		"Subscription.forwardRequests": {access: member, probes: []probe{
			{arg: "endpointId", query: `subscription($v: ID!) { forwardRequests(endpointId: $v, primary: true) { attemptId deliveryId path bodyBase64 } }`,
				values: aEndpoints, want: "NOT_FOUND"},
		}},

		// Fields of objects the caller already holds.
		"Account.activity": {access: owner, probes: []probe{
			{query: `{ me { activity { type subject } } }`, as: asAmy, want: "FORBIDDEN"},
		}},
		"Delivery.compare": {access: anyone, probes: []probe{
			{arg: "a", query: `query($d: ID!, $v: String!) { delivery(id: $d) { compare(a: $v, b: "original") { note request { where before after } } } }`,
				vars:   func(w *world) map[string]any { return map[string]any{"d": w.b.delivery} },
				values: of(func(w *world) string { return w.a.attempt }), want: "INVALID_INPUT"},
			{arg: "b", query: `query($d: ID!, $v: String!) { delivery(id: $d) { compare(a: "original", b: $v) { note request { where before after } } } }`,
				vars:   func(w *world) map[string]any { return map[string]any{"d": w.b.delivery} },
				values: of(func(w *world) string { return w.a.attempt }), want: "INVALID_INPUT"},
		}},
		"Delivery.attempt": {access: anyone, probes: []probe{
			// Another account's attempt on B's delivery is none of its own:
			// null, as an unknown one, and nothing of A's.
			{arg: "id", query: `query($d: ID!, $v: ID!) { delivery(id: $d) { id attempt(id: $v) { id status response { status headers { name value } } } } }`,
				vars:   func(w *world) map[string]any { return map[string]any{"d": w.b.delivery} },
				values: of(func(w *world) string { return w.a.attempt }), want: "",
				holds: func(w *world) []string { return []string{w.b.delivery} }},
		}},
		"Endpoint.deliveries": {access: member, probes: []probe{
			{arg: "after", query: `query($e: ID!, $v: String) { endpoint(id: $e) { deliveries(after: $v) { nodes { id body } pageInfo { endCursor } } } }`,
				vars: bLog, values: aCursor, match: noLeak, holds: func(w *world) []string { return w.b.logDeliveries }},
		}},
		"Endpoint.stats": {access: member},
		"Inspector.deliveries": {access: anyone, probes: []probe{
			{arg: "after", query: `query($i: ID!, $v: String) { inspector(id: $i) { deliveries(after: $v) { nodes { id body } } } }`,
				vars:   func(w *world) map[string]any { return map[string]any{"i": w.b.inspector} },
				values: aCursor, match: noLeak, holds: func(w *world) []string { return []string{w.b.inspectorDelivery} }},
		}},
		"Inspector.stats": {access: anyone},
	}
}

// TestSchemaTenancy holds the schema to the tenancy rules of
// docs/security.md: another account's ids read like unknown ones, leak
// nothing and change nothing, and owner-only operations refuse members.
func TestSchemaTenancy(t *testing.T) {
	table := tenancyTable()
	s := generated.NewExecutableSchema(generated.Config{}).Schema()

	t.Run("table", func(t *testing.T) {
		checkTable(t, s, table)
	})

	w := newWorld(t)
	before := w.snapshot()
	w.holdsAll(before)
	beforeLog := w.lastPosition()

	var calls int
	foreigners := []caller{
		{name: "B's owner", tok: w.bert, foreign: true, own: true},
		{name: "C's token", tok: w.carl, foreign: true},
	}
	t.Run("another account", func(t *testing.T) {
		calls += w.run(t, table, foreigners, func(p probe) bool { return p.as == nil })
	})
	w.unchanged(t, "after the other accounts' calls", beforeLog, before)

	// Without a token: a field anyone may call answers as the table says,
	// any other is refused UNAUTHENTICATED, the same for A's values as
	// for unknown ones.
	beforeLog = w.lastPosition()
	t.Run("no token", func(t *testing.T) {
		calls += w.run(t, table, []caller{{name: "no token", foreign: true}}, func(p probe) bool { return p.as == nil })
	})
	w.unchanged(t, "after the calls without a token", beforeLog, before)

	beforeLog = w.lastPosition()
	t.Run("a member", func(t *testing.T) {
		calls += w.run(t, table, nil, func(p probe) bool { return p.as != nil })
	})
	w.unchanged(t, "after the member's and the owner's calls", beforeLog, before)
	w.tokensValid(t)
	w.completeAttempt(t)
	t.Logf("%d fields in the table, %d calls", len(table), calls)
}

// checkTable fails for a field of the schema the table does not name, a
// reference argument no probe fills and no capability explains, an
// owner-only or operator-only field no member is refused, and a row for a
// field or argument the schema no longer has.
func checkTable(t *testing.T, s *ast.Schema, table map[string]rule) {
	seen, values := map[string]bool{}, map[string]bool{}
	referenced, refs := 0, 0
	for _, typ := range sortedTypes(s) {
		def := s.Types[typ]
		root := def == s.Query || def == s.Mutation || def == s.Subscription
		for _, f := range def.Fields {
			if strings.HasPrefix(f.Name, "__") {
				continue
			}
			key := typ + "." + f.Name
			args := referenceArgs(s, typ, f, values)
			if !root && len(f.Arguments) == 0 {
				continue
			}
			seen[key] = true
			r, ok := table[key]
			if !ok {
				t.Errorf("%s is not in the tenancy table: say who may call it, and probe its arguments %v with another account's values", key, args)
				continue
			}
			if len(args) > 0 {
				referenced++
				refs += len(args)
			}
			probed := map[string]bool{}
			for _, p := range r.probes {
				if p.arg != "" && !slices.Contains(args, p.arg) {
					t.Errorf("%s: a probe fills %q, which names no object of the field (its references: %v)", key, p.arg, args)
				}
				if p.as == nil && p.arg != "" {
					probed[p.arg] = true
				}
			}
			for _, a := range args {
				if !probed[a] && r.capability[a] == "" {
					t.Errorf("%s(%s) names an object: probe it with another account's value, or say why it is a capability", key, a)
				}
			}
			if root && len(f.Arguments) > 0 && !slices.ContainsFunc(r.probes, func(p probe) bool { return p.as == nil && p.vars == nil }) {
				t.Errorf("%s takes arguments: give it a probe the caller without a token makes (no vars, no as; anonymousOnly if only it should)", key)
			}
			for a := range r.capability {
				if !slices.Contains(args, a) {
					t.Errorf("%s: capability %q is no reference argument of the field", key, a)
				}
			}
			want := map[access]string{owner: "FORBIDDEN", operator: "UNAUTHENTICATED"}[r.access]
			if want != "" && !slices.ContainsFunc(r.probes, func(p probe) bool { return p.as != nil && p.want == want }) {
				t.Errorf("%s is for %s only: a member of the account must be refused %s", key, accessName(r.access), want)
			}
		}
	}
	for key := range table {
		if !seen[key] {
			t.Errorf("the tenancy table names %s, which the schema has not (or which takes no arguments)", key)
		}
	}
	for key := range valueArgs {
		if !values[key] {
			t.Errorf("valueArgs names %s, which is no String argument or input field the schema has", key)
		}
	}
	t.Logf("%d fields take %d arguments that name objects; %d fields have a row", referenced, refs, len(seen))
}

func accessName(a access) string {
	return [...]string{"anyone", "members", "owners", "the operator"}[a]
}

func sortedTypes(s *ast.Schema) []string {
	var out []string
	for name, d := range s.Types {
		if !d.BuiltIn && d.Kind == ast.Object && !strings.HasPrefix(name, "__") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// caller is who makes a probe's calls.
type caller struct {
	name, tok string // tok "": no token at all
	foreign   bool   // of another account than A (its answers may hold nothing of A's)
	// own is true for the caller whose objects the probes' vars and holds
	// name (B's owner); another foreign caller makes only the probes
	// without vars, and does not look for B's objects in its answers.
	own bool
}

// run makes, field by field, the calls of the probes pick selects, as
// each of the callers (or as the probe says), and returns how many it made.
func (w *world) run(t *testing.T, table map[string]rule, callers []caller, pick func(probe) bool) int {
	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	calls := 0
	for _, key := range keys {
		var ps []probe
		for _, p := range table[key].probes {
			if pick(p) {
				ps = append(ps, p)
			}
		}
		if len(ps) == 0 {
			continue
		}
		t.Run(key, func(t *testing.T) {
			for i, p := range ps {
				name := fmt.Sprintf("%s#%d", key, i+1)
				if p.as != nil {
					as := p.as(w)
					calls += w.probe(t, name+" as "+as.name, p, as)
					continue
				}
				for _, c := range callers {
					switch {
					case p.anonymousOnly && c.tok != "":
					case c.tok == "" && p.vars == nil:
						q := p
						q.want = anonymousWant(table[key], p)
						calls += w.probe(t, name+" as "+c.name, q, c)
					case c.tok != "" && (c.own || p.vars == nil):
						calls += w.probe(t, name+" as "+c.name, p, c)
					}
				}
			}
		})
	}
	return calls
}

// anonymousWant is what a probe of a field of rule r must get without a
// token: its own anonymous want, else its want when anyone may call the
// field, else UNAUTHENTICATED, whatever the value.
func anonymousWant(r rule, p probe) string {
	switch {
	case p.anonymous != "":
		return p.anonymous
	case r.access == anyone:
		return p.want
	}
	return "UNAUTHENTICATED"
}

// probe makes one probe's calls as c and checks their answers.
func (w *world) probe(t *testing.T, name string, p probe, c caller) int {
	t.Helper()
	vars := func(v string) map[string]any {
		out := map[string]any{}
		if p.vars != nil {
			out = p.vars(w)
		}
		if p.arg != "" {
			out["v"] = v
		}
		return out
	}
	check := func(what, v string, got answer) {
		t.Helper()
		text := got.blanked(v)
		switch {
		case p.want == "" && len(got.Errors) > 0:
			t.Errorf("%s: refused %s, want an answer", what, text)
		case p.want == refused && (len(got.Errors) == 0 || !got.nullData()):
			t.Errorf("%s: %s, want a refusal without data", what, text)
		case p.want != "" && p.want != refused && got.code() != p.want:
			t.Errorf("%s: %s, want %s", what, text, p.want)
		}
		if c.foreign {
			for _, m := range w.marks {
				if strings.Contains(text, m) {
					t.Errorf("%s: the answer holds %q of account A's: %.400s", what, m, text)
				}
			}
		}
		if p.hides != nil {
			for _, m := range p.hides(w) {
				if strings.Contains(text, m) {
					t.Errorf("%s: the answer holds %q: %.400s", what, m, text)
				}
			}
		}
		if p.holds != nil && c.own {
			for _, m := range p.holds(w) {
				if !strings.Contains(text, m) {
					t.Errorf("%s: the answer lacks %q, so it read nothing: %.400s", what, m, text)
				}
			}
		}
	}
	if p.arg == "" {
		check(name, "", w.call(t, c.tok, p.query, vars(""), p.nudge))
		return 1
	}
	calls := 0
	values := p.values(w)
	if c.foreign && p.match == same {
		// An id of any kind of A's object reads as unknown: the probe's
		// own values, then every other id of A's.
		for _, id := range w.aIDs {
			if !slices.Contains(values, id) {
				values = append(values, id)
			}
		}
	}
	for _, v := range values {
		if v == "" {
			t.Fatalf("%s: an empty value of A's: the world is missing something", name)
		}
		what := fmt.Sprintf("%s with %s=%s", name, p.arg, v)
		ofA := w.call(t, c.tok, p.query, vars(v), p.nudge)
		check(what, v, ofA)
		calls++
		if p.match == noLeak {
			continue
		}
		u := unknownLike(t, v)
		unknown := w.call(t, c.tok, p.query, vars(u), p.nudge)
		calls++
		switch p.match {
		case same:
			if f, n := ofA.blanked(v), unknown.blanked(u); f != n {
				t.Errorf("%s: a value of A's is answered %s, an unknown one %s", what, f, n)
			}
		case sameCode:
			if ofA.code() != unknown.code() || ofA.field() != unknown.field() {
				t.Errorf("%s: a value of A's is refused %s on %q, an unknown one %s on %q",
					what, ofA.code(), ofA.field(), unknown.code(), unknown.field())
			}
		}
	}
	return calls
}

func firstLine(q string) string {
	q, _, _ = strings.Cut(q, "{ ")
	if len(q) > 60 {
		q = q[:60]
	}
	return strings.TrimSpace(q)
}

// answer is one GraphQL answer as it came, and decoded.
type answer struct {
	status int // the HTTP status; 0 for a subscription's message
	raw    string
	Data   json.RawMessage
	Errors []struct {
		Message    string
		Extensions map[string]any
	}
}

func (a answer) code() string {
	if len(a.Errors) == 0 {
		return ""
	}
	c, _ := a.Errors[0].Extensions["code"].(string)
	return c
}

func (a answer) field() string {
	if len(a.Errors) == 0 {
		return ""
	}
	f, _ := a.Errors[0].Extensions["field"].(string)
	return f
}

func (a answer) nullData() bool {
	d := strings.TrimSpace(string(a.Data))
	return d == "" || d == "null"
}

// blanked is the answer's status and text with the value given blanked out.
func (a answer) blanked(v string) string {
	text := a.raw
	if v != "" {
		text = strings.ReplaceAll(text, v, "<v>")
	}
	if a.status != 0 {
		text = fmt.Sprintf("HTTP %d %s", a.status, text)
	}
	return text
}

func decodeAnswer(t *testing.T, status int, raw []byte) answer {
	t.Helper()
	a := answer{status: status, raw: string(raw)}
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer %q: %v", raw, err)
	}
	return a
}

// call runs an operation with a bearer token: a query or mutation over
// HTTP, a subscription over a WebSocket (see subscribe).
func (w *world) call(t *testing.T, tok, query string, vars map[string]any, nudge bool) answer {
	t.Helper()
	if strings.HasPrefix(query, "subscription") {
		return w.subscribe(t, tok, query, vars, nudge)
	}
	// Each call from an address of its own: the per-address limits of
	// sign-ins and joins are not what is probed here.
	w.peers++
	status, raw, err := postAs(w.url, tok, query, vars, fmt.Sprintf("10.%d.%d.%d", w.peers>>16&255, w.peers>>8&255, w.peers&255))
	if err != nil {
		t.Fatal(err)
	}
	return decodeAnswer(t, status, raw)
}

// postAs sends one operation and returns the HTTP status and body; safe
// to call from any goroutine.
func postAs(url, tok, query string, vars map[string]any, peer string) (int, []byte, error) {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return 0, nil, fmt.Errorf("encode: %w", err)
	}
	req, err := http.NewRequest(http.MethodPost, url+"/graphql", bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if peer != "" {
		req.Header.Set("X-Test-Peer", peer) // see peerHandler
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("post %s: %w", firstLine(query), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("read the answer to %s: %w", firstLine(query), err)
	}
	return resp.StatusCode, raw, nil
}

// subscribe starts a subscription on a socket of its own. A refusal is
// its first message; with nudge, a delivery of B's is recorded and every
// message up to the one that carries it is the answer.
func (w *world) subscribe(t *testing.T, tok, query string, vars map[string]any, nudge bool) answer {
	t.Helper()
	auth := ""
	if tok != "" {
		auth = "Bearer " + tok
	}
	s := dialAgent(t, w.url, auth, "127.0.0.1")
	defer s.c.Close()
	if err := s.c.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}}); err != nil {
		t.Fatal(err)
	}
	mark := ""
	if nudge {
		mark = w.deliver(t, w.b.logEp, domain.AddressEndpoint, w.b.id, "bravo nudge", false)
		w.b.logDeliveries = append(w.b.logDeliveries, mark)
	}
	var got []json.RawMessage
	// A refusal comes in milliseconds: a subscription still silent after
	// this was accepted.
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				t.Fatalf("%s: the socket closed", firstLine(query))
			}
			if m.Type != "next" && m.Type != "error" {
				continue
			}
			got = append(got, m.Payload)
			var one answer
			if m.Type == "error" { // a list of errors
				one.raw = `{"errors":` + string(m.Payload) + `}`
			} else {
				one.raw = string(m.Payload)
			}
			if err := json.Unmarshal([]byte(one.raw), &one); err != nil {
				t.Fatalf("message %s: %v", m.Payload, err)
			}
			if len(one.Errors) > 0 || !nudge || strings.Contains(string(m.Payload), mark) {
				if len(got) > 1 {
					all, _ := json.Marshal(got)
					one.raw = string(all)
				}
				return one
			}
		case <-timeout:
			all, _ := json.Marshal(got)
			return answer{raw: fmt.Sprintf(`{"accepted":%s}`, all), Data: json.RawMessage(all)}
		}
	}
}

// unknownLike is a value of the same form as v that names nothing.
func unknownLike(t *testing.T, v string) string {
	t.Helper()
	isUUID := func(s string) bool { return len(s) == 36 && strings.Count(s, "-") == 4 }
	conn, ep, session := strings.Cut(v, "/") // an agent session: <connection>/<Endpoint>
	switch {
	case session && isUUID(conn) && domain.ValidateAddressID(ep) == nil:
		return commands.NewEventID() + "/" + commands.NewAddressID()
	case strings.HasPrefix(v, "rjn_") || strings.HasPrefix(v, "rdc_"):
		tok, _ := commands.NewToken()
		return v[:4] + strings.TrimPrefix(tok, "rly_")
	case domain.NormalUserCode(v) != "" && len(v) == 9:
		return randomUserCode()
	case isUUID(v):
		return commands.NewEventID()
	case domain.ValidateAddressID(v) == nil:
		return commands.NewAddressID()
	}
	t.Fatalf("no unknown value of the form of %q", v)
	return ""
}

func randomUserCode() string {
	b := make([]byte, 0, 9)
	for i := range 8 {
		if i == 4 {
			b = append(b, '-')
		}
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(domain.UserCodeAlphabet))))
		b = append(b, domain.UserCodeAlphabet[n.Int64()])
	}
	return string(b)
}

// newWorld makes accounts B and A, B's first so that A's cursors and
// positions come after everything of B's.
func newWorld(t *testing.T) *world {
	t.Helper()
	// Forwards wait long enough for A's retry to stay open while the
	// probes run.
	// The probes call the redrives hundreds of times as one account: the
	// bulk rate (TestBulkMutationsAreRatedPerAccount) is out of the way.
	// Its accounts hold a few Endpoints each, on a relay whose
	// --account-endpoints says so: the endpoints list is priced at that
	// many rows, so the probe of every Endpoint's listeners is within the
	// budget (at the default 1 000 Endpoints of 256 listeners it is not).
	const accountEndpoints = 8
	var res *graph.Resolver
	e := newEnvConfig(t, nil, func(r *graph.Resolver) {
		r.Quotas = r.Views.(*projections.Runner).Accounts
		r.BulkRate = ratelimit.Rate{N: 1_000_000, Per: time.Second, Burst: 1_000_000}
		res = r
	}, func(c *commands.Config) {
		c.ForwardTimeout = 5 * time.Minute
		c.MaxEndpoints = accountEndpoints
	})
	e.h = graph.NewHandler(res, graph.ServerOptions{Limits: graph.Limits{Endpoints: accountEndpoints}})
	e.c = client.New(e.h)
	srv := httptest.NewServer(peerHandler(e.h))
	t.Cleanup(srv.Close)
	w := &world{t: t, e: e, url: srv.URL}
	w.makeBravo(t, srv)
	w.makeAlpha(t, srv)
	return w
}

func (w *world) must(t *testing.T, tok, query string, vars map[string]any, out any) {
	t.Helper()
	a := w.call(t, tok, query, vars, false)
	if len(a.Errors) > 0 {
		t.Fatalf("%s: %s", firstLine(query), a.raw)
	}
	if out != nil {
		if err := json.Unmarshal(a.Data, out); err != nil {
			t.Fatalf("%s: %v", firstLine(query), err)
		}
	}
}

func (w *world) createEndpoint(t *testing.T, tok string, input map[string]any) string {
	t.Helper()
	var out struct{ CreateEndpoint struct{ ID string } }
	w.must(t, tok, `mutation($in: CreateEndpointInput!) { createEndpoint(input: $in) { id } }`, map[string]any{"in": input}, &out)
	return out.CreateEndpoint.ID
}

// deliver records a request as ingress would, and waits for the views;
// queued puts it in its QUEUE Endpoint's queue.
func (w *world) deliver(t *testing.T, address string, kind domain.AddressKind, accountID, body string, queued bool) string {
	t.Helper()
	id := commands.NewDeliveryID()
	w.e.seed(t, domain.DeliveryStream(id), time.Now(), domain.DeliveryReceived{
		DeliveryID: id, Address: address, AddressKind: kind, AccountID: accountID,
		Method: "POST", Target: "/hooks", Host: address + ".localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
		Headers: []domain.Header{{Name: "Content-Type", Value: "text/plain"}}, Body: []byte(body), BodySize: int64(len(body)), Complete: true, Queued: queued,
	})
	return id
}

func (w *world) makeBravo(t *testing.T, srv *httptest.Server) {
	t.Helper()
	bert := newBrowser(t, srv)
	w.b.id = bert.signUp("Team Bravo", "bert@bravo.test").Account.ID
	w.bert = sessionOf(t, bert)
	w.b.logEp = w.createEndpoint(t, w.bert, map[string]any{"name": "bravo-log", "mode": "LOG"})
	w.b.queueEp = w.createEndpoint(t, w.bert, map[string]any{"name": "bravo-queue", "mode": "QUEUE"})
	w.b.delivery = w.deliver(t, w.b.logEp, domain.AddressEndpoint, w.b.id, "bravo body", false)
	w.b.logDeliveries = []string{w.b.delivery}
	w.deliver(t, w.b.queueEp, domain.AddressEndpoint, w.b.id, "bravo queued", true)
	w.b.queueDeliveryDead = w.deliver(t, w.b.queueEp, domain.AddressEndpoint, w.b.id, "bravo dead", true)
	w.e.seed(t, domain.DeliveryStream(w.b.queueDeliveryDead), time.Now(), domain.DeliveryDead{DeliveryID: w.b.queueDeliveryDead, Failures: 3, Reason: "gone"})
	var in struct{ CreateInspector struct{ ID string } }
	w.must(t, "", `mutation { createInspector { id } }`, nil, &in)
	w.b.inspector = in.CreateInspector.ID
	w.b.inspectorDelivery = w.deliver(t, w.b.inspector, domain.AddressInspector, "", "guest body", false)
	var c struct{ SignUp struct{ Token string } }
	w.must(t, "", `mutation { signUp(name: "Team Charlie") { token } }`, nil, &c)
	w.carl = c.SignUp.Token
}

func (w *world) makeAlpha(t *testing.T, srv *httptest.Server) {
	t.Helper()
	ann := newBrowser(t, srv)
	signed := ann.signUp("Team Alpha", "ann@alpha.test")
	w.a.id, w.a.annMember = signed.Account.ID, signed.Member.ID
	w.ann = sessionOf(t, ann)
	join := func(code, login string) (string, string) {
		b := newBrowser(t, srv)
		var out struct{ JoinAccount sessionOut }
		if a := b.join(code, login); len(a.Errors) > 0 {
			t.Fatalf("join %s: %+v", login, a.Errors)
		} else if err := json.Unmarshal(a.Data, &out); err != nil {
			t.Fatal(err)
		}
		return out.JoinAccount.Member.ID, sessionOf(t, b)
	}
	w.a.amyMember, w.amy = join(ann.invite(), "amy@alpha.test")
	// Ava's invite is spent: its code is one B might hold.
	w.a.spentInvite = ann.invite()
	w.a.avaMember, _ = join(w.a.spentInvite, "ava@alpha.test")
	var tok struct {
		CreateToken struct {
			Secret string
			Token  struct{ ID string }
		}
	}
	w.must(t, w.ann, `mutation { createToken(name: "Alpha laptop") { secret token { id } } }`, nil, &tok)
	w.a.apiToken, w.a.apiTokenID = tok.CreateToken.Secret, tok.CreateToken.Token.ID
	sessionID := func(tok string) string {
		var list struct {
			Tokens []struct {
				ID      string
				Current bool
			}
		}
		w.must(t, tok, `{ tokens { id current } }`, nil, &list)
		for _, x := range list.Tokens {
			if x.Current {
				return x.ID
			}
		}
		t.Fatal("no current token")
		return ""
	}
	w.a.annSession, w.a.amySession = sessionID(w.ann), sessionID(w.amy)

	// A device A let in: its codes are spent.
	var dc struct{ RequestDeviceCode deviceCode }
	w.must(t, "", `mutation { requestDeviceCode(clientName: "alpha-device") { deviceCode userCode } }`, nil, &dc)
	w.a.userCode, w.a.deviceCode = dc.RequestDeviceCode.UserCode, dc.RequestDeviceCode.DeviceCode
	w.must(t, w.ann, `mutation($c: String!) { approveDevice(userCode: $c) { status } }`, map[string]any{"c": w.a.userCode}, nil)
	var polled struct{ PollDeviceCode struct{ Token string } }
	w.must(t, "", `mutation($c: String!) { pollDeviceCode(deviceCode: $c) { token } }`, map[string]any{"c": w.a.deviceCode}, &polled)
	w.a.deviceToken = polled.PollDeviceCode.Token
	w.a.deviceTokenID = sessionID(w.a.deviceToken)

	// Three Endpoints, each with something to lose.
	w.a.logEp = w.createEndpoint(t, w.ann, map[string]any{"name": "Alpha log", "mode": "LOG",
		"answer": map[string]any{"status": 202, "body": "Alpha answer"}})
	var smee struct{ IssueSmeeKey struct{ URL string } }
	w.must(t, w.ann, `mutation($e: ID!) { issueSmeeKey(endpointId: $e) { url } }`, map[string]any{"e": w.a.logEp}, &smee)
	w.a.smeeURL = smee.IssueSmeeKey.URL
	w.a.proxyEp = w.createEndpoint(t, w.ann, map[string]any{"name": "Alpha proxy", "mode": "PROXY", "target": "127.0.0.1:9", "responseCapture": true})
	w.a.queueEp = w.createEndpoint(t, w.ann, map[string]any{"name": "Alpha queue", "mode": "QUEUE", "target": "127.0.0.1:9"})
	w.a.logDelivery = w.deliver(t, w.a.logEp, domain.AddressEndpoint, w.a.id, "Alpha secret body", false)
	w.a.proxyDelivery = w.deliver(t, w.a.proxyEp, domain.AddressEndpoint, w.a.id, "Alpha proxied body", false)
	w.a.queuedDelivery = w.deliver(t, w.a.queueEp, domain.AddressEndpoint, w.a.id, "Alpha queued body", true)
	w.a.deadDelivery = w.deliver(t, w.a.queueEp, domain.AddressEndpoint, w.a.id, "Alpha dead body", true)
	w.e.seed(t, domain.DeliveryStream(w.a.deadDelivery), time.Now(), domain.DeliveryDead{DeliveryID: w.a.deadDelivery, Failures: 3, Reason: "Alpha gone"})
	// And one deleted, with the delivery it kept.
	w.a.goneEp = w.createEndpoint(t, w.ann, map[string]any{"name": "Alpha deleted", "mode": "LOG"})
	w.a.goneDelivery = w.deliver(t, w.a.goneEp, domain.AddressEndpoint, w.a.id, "Alpha deleted body", false)
	w.must(t, w.ann, `mutation($e: ID!) { deleteEndpoint(id: $e) }`, map[string]any{"e": w.a.goneEp}, nil)

	// A's agent, and a retry it holds open: the attempt B will try to answer.
	w.agent = dialAgent(t, w.url, "Bearer "+w.a.apiToken, "127.0.0.1")
	if err := w.agent.c.WriteJSON(map[string]any{"id": "work", "type": "subscribe", "payload": map[string]any{
		"query":     `subscription($e: ID!) { forwardRequests(endpointId: $e) { attemptId deliveryId } }`,
		"variables": map[string]any{"e": w.a.proxyEp}}}); err != nil {
		t.Fatal(err)
	}
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		var ep struct{ Endpoint struct{ AgentConnected bool } }
		w.must(t, w.ann, `query($e: ID!) { endpoint(id: $e) { agentConnected } }`, map[string]any{"e": w.a.proxyEp}, &ep)
		if !ep.Endpoint.AgentConnected {
			return errors.New("A's agent is not connected yet")
		}
		return nil
	})
	w.retried = make(chan []byte, 1)
	go func() {
		_, raw, err := postAs(w.url, w.ann, `mutation($d: ID!) { retryDelivery(id: $d) { responseStatus attempts { id status } } }`, map[string]any{"d": w.a.proxyDelivery}, "")
		if err != nil {
			raw = []byte(err.Error())
		}
		w.retried <- raw
	}()
	select {
	case m := <-w.agent.msgs:
		var fr struct {
			Data struct {
				ForwardRequests struct{ AttemptID, DeliveryID string }
			}
		}
		if err := json.Unmarshal(m.Payload, &fr); err != nil || fr.Data.ForwardRequests.DeliveryID != w.a.proxyDelivery {
			t.Fatalf("A's agent got %s (%v), want the retry of %s", m.Payload, err, w.a.proxyDelivery)
		}
		w.a.attempt = fr.Data.ForwardRequests.AttemptID
	case <-time.After(15 * time.Second):
		t.Fatal("A's agent got no forward of the retry")
	}

	// A cursor of A's history and a position of A's log.
	var page struct {
		Endpoint struct {
			Deliveries struct{ Edges []struct{ Cursor string } }
		}
	}
	w.must(t, w.ann, `query($e: ID!) { endpoint(id: $e) { deliveries { edges { cursor } } } }`, map[string]any{"e": w.a.logEp}, &page)
	if len(page.Endpoint.Deliveries.Edges) == 0 {
		t.Fatal("A's history is empty")
	}
	w.a.cursor = page.Endpoint.Deliveries.Edges[0].Cursor
	var events struct {
		Events struct {
			Edges []struct {
				Cursor string
				Node   struct{ ID string }
			}
		}
	}
	w.must(t, w.ann, `{ events(first: 100) { edges { cursor node { id } } } }`, nil, &events)
	if n := len(events.Events.Edges); n == 0 {
		t.Fatal("A's log is empty")
	} else {
		w.a.position, w.a.event = events.Events.Edges[n/2].Cursor, events.Events.Edges[n/2].Node.ID
	}
	var listeners struct {
		Endpoint struct{ Listeners []struct{ AgentID string } }
	}
	w.must(t, w.ann, `query($e: ID!) { endpoint(id: $e) { listeners { agentId } } }`, map[string]any{"e": w.a.proxyEp}, &listeners)
	if len(listeners.Endpoint.Listeners) != 1 {
		t.Fatalf("A's listeners: %+v", listeners.Endpoint.Listeners)
	}
	w.a.agentID = listeners.Endpoint.Listeners[0].AgentID

	// Every id of A's: each probe of a field that must answer as for an
	// unknown id tries them all, whatever kind of object it names.
	w.aIDs = []string{w.a.id, w.a.annMember, w.a.amyMember, w.a.avaMember, w.a.apiTokenID, w.a.annSession, w.a.amySession,
		w.a.deviceTokenID, w.a.logEp, w.a.proxyEp, w.a.queueEp, w.a.logDelivery, w.a.proxyDelivery, w.a.queuedDelivery,
		w.a.deadDelivery, w.a.goneEp, w.a.goneDelivery, w.a.attempt, w.a.agentID, w.a.event}

	w.marks = []string{"Alpha", "alpha.test", w.a.id, w.a.annMember, w.a.amyMember, w.a.avaMember,
		w.a.apiTokenID, w.a.annSession, w.a.amySession, w.a.deviceTokenID, w.a.apiToken, w.ann, w.amy, w.a.deviceToken,
		w.a.logEp, w.a.proxyEp, w.a.queueEp, w.a.logDelivery, w.a.proxyDelivery, w.a.queuedDelivery, w.a.deadDelivery,
		w.a.goneEp, w.a.goneDelivery, w.a.attempt, w.a.agentID, w.a.event, w.a.spentInvite, w.a.userCode, w.a.deviceCode, w.a.smeeURL}
}

func (w *world) lastPosition() uint64 {
	w.t.Helper()
	p, err := w.e.store.LastPosition(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	return p
}

// snapshotQueries are what account A sees of itself: its team, activity
// and quota, its tokens and queue, then each of its Endpoints with its
// settings, listeners and history (one query each, within the cost budget).
const (
	snapshotAccount = `query($q: ID!, $d: ID!) {
	me { id name members { id login role } activity(first: 200) { type subject detail by }
		usage { storageQuota rate apiCost storageOverride rateOverride apiCostOverride deliveries } }
	tokens { id name session expiresAt member }
	endpoints { id }
	queuedDeliveries(endpoint: $q) { delivery { id } queue { state tries failures reason } }
	delivery(id: $d) { id responseStatus attempts { id status } }
}`
	snapshotEndpoint = `query($e: ID!) { endpoint(id: $e) {
	id name url smeeKey mode target responseCapture agentCount answer { status body }
	listeners { agentId primary target } retention { window }
	deliveries(first: 10) { edges { cursor node { id body responseStatus attempts { id status } } } } } }`
)

func (w *world) snapshot() string {
	w.t.Helper()
	// Commands append without waiting for every view: read once the views
	// hold the whole log.
	if err := w.e.views.WaitFor(context.Background(), w.lastPosition()); err != nil {
		w.t.Fatal(err)
	}
	var b strings.Builder
	for _, q := range []struct {
		query string
		vars  map[string]any
	}{
		{snapshotAccount, map[string]any{"q": w.a.queueEp, "d": w.a.proxyDelivery}},
		{snapshotEndpoint, map[string]any{"e": w.a.logEp}},
		{snapshotEndpoint, map[string]any{"e": w.a.proxyEp}},
		{snapshotEndpoint, map[string]any{"e": w.a.queueEp}},
	} {
		a := w.call(w.t, w.a.apiToken, q.query, q.vars, false)
		if len(a.Errors) > 0 {
			w.t.Fatalf("A's snapshot: %s", a.raw)
		}
		b.Write(a.Data)
		b.WriteByte('\n')
	}
	return b.String()
}

// holdsAll checks that the values the probes use are A's own, live:
// A's snapshot shows every one.
func (w *world) holdsAll(snapshot string) {
	w.t.Helper()
	for _, id := range []string{w.a.id, w.a.annMember, w.a.amyMember, w.a.avaMember, w.a.apiTokenID, w.a.annSession,
		w.a.amySession, w.a.deviceTokenID, w.a.logEp, w.a.proxyEp, w.a.queueEp, w.a.logDelivery, w.a.proxyDelivery,
		w.a.queuedDelivery, w.a.deadDelivery, w.a.attempt, w.a.cursor, "Alpha secret body", "Alpha answer"} {
		if !strings.Contains(snapshot, id) {
			w.t.Fatalf("A's own view lacks %q: the probes would use a dead value\n%s", id, snapshot)
		}
	}
}

// unchanged checks that the log holds nothing of A's since position from
// (a use of one of A's tokens by its own member or owner apart) and that
// A sees itself as it did.
func (w *world) unchanged(t *testing.T, when string, from uint64, before string) {
	t.Helper()
	events, err := w.e.store.ReadAll(context.Background(), from, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	own := []string{w.a.apiTokenID, w.a.annSession, w.a.amySession}
	for _, ev := range events {
		if ev.Type == "token.used.v1" && ev.Stream == domain.TokenUseStream(w.a.id) &&
			slices.ContainsFunc(own, func(id string) bool { return strings.Contains(string(ev.Data), id) }) {
			continue
		}
		for _, m := range w.marks {
			if strings.Contains(ev.Stream, m) || strings.Contains(string(ev.Data), m) {
				t.Errorf("%s: the log gained %s on %s, naming %q of account A's: %.300s", when, ev.Type, ev.Stream, m, ev.Data)
				break
			}
		}
	}
	if after := w.snapshot(); after != before {
		t.Errorf("%s: account A changed:\nbefore %s\nafter  %s", when, before, after)
	}
}

// tokensValid checks that every credential of A's still signs in as A.
func (w *world) tokensValid(t *testing.T) {
	t.Helper()
	for name, tok := range map[string]string{"ann's session": w.ann, "amy's session": w.amy, "the API token": w.a.apiToken, "the device's token": w.a.deviceToken} {
		var me struct{ Me *struct{ ID string } }
		w.must(t, tok, `{ me { id } }`, nil, &me)
		if me.Me == nil || me.Me.ID != w.a.id {
			t.Errorf("%s no longer signs in as A: %+v", name, me.Me)
		}
	}
}

// completeAttempt answers the attempt B could not, as A's agent: A's retry
// gets that answer.
func (w *world) completeAttempt(t *testing.T) {
	t.Helper()
	w.must(t, w.a.apiToken, `mutation($a: ID!) { completeForward(input: {attemptId: $a, status: 201, bodyBase64: "QWxwaGEgZG9uZQ=="}) }`,
		map[string]any{"a": w.a.attempt}, nil)
	select {
	case raw := <-w.retried:
		var got struct {
			Data struct {
				RetryDelivery struct {
					ResponseStatus int
					Attempts       []struct {
						ID     string
						Status int
					}
				}
			}
		}
		if err := json.Unmarshal(raw, &got); err != nil || got.Data.RetryDelivery.ResponseStatus != 201 {
			t.Fatalf("A's retry: %s (%v), want A's agent's 201", raw, err)
		}
		at := got.Data.RetryDelivery.Attempts
		if len(at) != 1 || at[0].ID != w.a.attempt || at[0].Status != 201 {
			t.Errorf("A's retry's attempts %+v, want %s answered 201", at, w.a.attempt)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("A's retry did not end")
	}
}
