package graph

import (
	"context"
	"errors"
	"strings"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/generated"
	"github.com/relayhq/relay/graph/model"
)

// Member is the resolver for the member field.
func (r *accountResolver) Member(ctx context.Context, obj *model.Account) (*model.Member, error) {
	return r.accountMember(ctx, obj)
}

// Members is the resolver for the members field.
func (r *accountResolver) Members(ctx context.Context, obj *model.Account) ([]*model.Member, error) {
	return r.accountMembers(ctx, obj)
}

// Activity is the resolver for the activity field.
func (r *accountResolver) Activity(ctx context.Context, obj *model.Account, first *int) ([]*model.ActivityEntry, error) {
	return r.accountActivity(ctx, obj, first)
}

// Usage is the resolver for the usage field.
func (r *accountResolver) Usage(ctx context.Context, obj *model.Account) (*model.AccountUsage, error) {
	return r.accountUsage(ctx, obj)
}

// Attempts is the resolver for the attempts field.
func (r *deliveryResolver) Attempts(ctx context.Context, obj *model.Delivery) ([]*model.Attempt, error) {
	return r.attemptsWithResponses(ctx, obj)
}

// Attempt is the resolver for the attempt field.
func (r *deliveryResolver) Attempt(ctx context.Context, obj *model.Delivery, id string) (*model.Attempt, error) {
	return r.attemptByID(ctx, obj, id)
}

// Queue is the resolver for the queue field.
func (r *deliveryResolver) Queue(ctx context.Context, obj *model.Delivery) (*model.DeliveryQueue, error) {
	return r.deliveryQueue(ctx, obj)
}

// Explanation is the resolver for the explanation field.
func (r *deliveryResolver) Explanation(ctx context.Context, obj *model.Delivery) (string, error) {
	x, err := r.explainDelivery(ctx, obj)
	if err != nil {
		return "", err
	}
	return x.Text(), nil
}

// Why is the resolver for the why field.
func (r *deliveryResolver) Why(ctx context.Context, obj *model.Delivery) (*model.Explanation, error) {
	x, err := r.explainDelivery(ctx, obj)
	if err != nil {
		return nil, err
	}
	return toExplanation(x), nil
}

// Compare is the resolver for the compare field.
func (r *deliveryResolver) Compare(ctx context.Context, obj *model.Delivery, a string, b string) (*model.AttemptComparison, error) {
	return r.compareAttempts(ctx, obj, a, b)
}

// Listeners is the resolver for the listeners field.
func (r *endpointResolver) Listeners(ctx context.Context, obj *model.Endpoint) ([]*model.Listener, error) {
	return r.listeners(ctx, obj.ID), nil
}

// Deliveries is the resolver for the deliveries field.
func (r *endpointResolver) Deliveries(ctx context.Context, obj *model.Endpoint, first *int, after *string, filter *model.DeliveryFilter) (*model.DeliveryConnection, error) {
	page, err := r.history(ctx, obj.ID, clampFirst(first), deref(after), filter)
	if err != nil {
		return nil, err
	}
	return toConnection(page), nil
}

// Queue is the resolver for the queue field.
func (r *endpointResolver) Queue(ctx context.Context, obj *model.Endpoint) (*model.EndpointQueue, error) {
	return r.endpointQueue(ctx, obj)
}

// Stats is the resolver for the stats field.
func (r *endpointResolver) Stats(ctx context.Context, obj *model.Endpoint, rangeArg *model.StatsRange) (*model.Stats, error) {
	return r.stats(ctx, obj.ID, rangeArg, true, obj.CreatedAt)
}

// Stats is the resolver for the stats field.
func (r *inspectorResolver) Stats(ctx context.Context, obj *model.Inspector, rangeArg *model.StatsRange) (*model.Stats, error) {
	return r.stats(ctx, obj.ID, rangeArg, false, obj.CreatedAt)
}

// Deliveries is the resolver for the deliveries field.
func (r *inspectorResolver) Deliveries(ctx context.Context, obj *model.Inspector, first *int, after *string, filter *model.DeliveryFilter) (*model.DeliveryConnection, error) {
	page, err := r.history(ctx, obj.ID, clampFirst(first), deref(after), filter)
	if err != nil {
		return nil, err
	}
	return toConnection(page), nil
}

// CreateInspector is the resolver for the createInspector field.
func (r *mutationResolver) CreateInspector(ctx context.Context, smee *bool) (*model.Inspector, error) {
	if err := r.limitAnonymous(ctx); err != nil {
		return nil, err
	}
	in, err := r.Service.CreateInspectorWith(ctx, domain.InspectorOptions{Smee: smee != nil && *smee, Network: clientNetwork(ctx)})
	if err != nil {
		return nil, err
	}
	return r.toInspector(in), nil
}

// SignUp is the resolver for the signUp field.
func (r *mutationResolver) SignUp(ctx context.Context, name string, invite *string) (*model.SignUpPayload, error) {
	// Input first: a malformed one spends none of the address's rate.
	if err := domain.ValidateAccountName(name); err != nil {
		return nil, err
	}
	if err := r.limitAnonymous(ctx); err != nil {
		return nil, err
	}
	acc, token, err := r.Service.SignUp(ctx, name, deref(invite), clientNetwork(ctx))
	if err != nil {
		return nil, err
	}
	return &model.SignUpPayload{Account: &model.Account{ID: acc.ID, Name: acc.Name}, Token: token}, nil
}

// CreateInvite is the resolver for the createInvite field.
func (r *mutationResolver) CreateInvite(ctx context.Context, expiresIn *string) (*model.Invite, error) {
	return r.createInvite(ctx, expiresIn)
}

// SignUpWithPassword is the resolver for the signUpWithPassword field.
func (r *mutationResolver) SignUpWithPassword(ctx context.Context, name string, login string, password string, invite *string) (*model.SessionPayload, error) {
	return r.signUpWithPassword(ctx, name, login, password, invite)
}

// SignIn is the resolver for the signIn field.
func (r *mutationResolver) SignIn(ctx context.Context, login string, password string) (*model.SessionPayload, error) {
	return r.signInWithPassword(ctx, login, password)
}

// SignOut is the resolver for the signOut field.
func (r *mutationResolver) SignOut(ctx context.Context) (bool, error) {
	return r.signOut(ctx)
}

// ChangePassword is the resolver for the changePassword field.
func (r *mutationResolver) ChangePassword(ctx context.Context, currentPassword string, newPassword string) (bool, error) {
	return r.changePassword(ctx, currentPassword, newPassword)
}

// SetUpSignIn is the resolver for the setUpSignIn field.
func (r *mutationResolver) SetUpSignIn(ctx context.Context, login string, password string) (*model.SessionPayload, error) {
	return r.setUpSignIn(ctx, login, password)
}

// CreateMemberInvite is the resolver for the createMemberInvite field.
func (r *mutationResolver) CreateMemberInvite(ctx context.Context, role *model.MemberRole, expiresIn *string) (*model.MemberInvite, error) {
	return r.createMemberInvite(ctx, role, expiresIn)
}

// JoinAccount is the resolver for the joinAccount field.
func (r *mutationResolver) JoinAccount(ctx context.Context, code string, login string, password string) (*model.SessionPayload, error) {
	return r.joinAccount(ctx, code, login, password)
}

// RemoveMember is the resolver for the removeMember field.
func (r *mutationResolver) RemoveMember(ctx context.Context, id string) (bool, error) {
	return r.removeMember(ctx, id)
}

// ChangeMemberRole is the resolver for the changeMemberRole field.
func (r *mutationResolver) ChangeMemberRole(ctx context.Context, id string, role model.MemberRole) (*model.Member, error) {
	return r.changeMemberRole(ctx, id, role)
}

// CreateAccount is the resolver for the createAccount field.
func (r *mutationResolver) CreateAccount(ctx context.Context, name string) (*model.SignUpPayload, error) {
	if !r.isAdmin(ctx) {
		return nil, domain.ErrUnauthenticated
	}
	acc, token, err := r.Service.CreateAccount(ctx, name)
	if err != nil {
		return nil, err
	}
	return &model.SignUpPayload{Account: &model.Account{ID: acc.ID, Name: acc.Name}, Token: token}, nil
}

// SetAccountQuota is the resolver for the setAccountQuota field.
func (r *mutationResolver) SetAccountQuota(ctx context.Context, account string, storage *string, rate *string, apiCost *string) (*model.AccountUsage, error) {
	return r.setAccountQuota(ctx, account, storage, rate, apiCost)
}

// CreateToken is the resolver for the createToken field.
func (r *mutationResolver) CreateToken(ctx context.Context, name string, expiresIn *string) (*model.CreateTokenPayload, error) {
	return r.createToken(ctx, name, expiresIn)
}

// RevokeToken is the resolver for the revokeToken field.
func (r *mutationResolver) RevokeToken(ctx context.Context, id string) (bool, error) {
	return r.revokeToken(ctx, id)
}

// RequestDeviceCode is the resolver for the requestDeviceCode field.
func (r *mutationResolver) RequestDeviceCode(ctx context.Context, clientName string) (*model.DeviceCode, error) {
	return r.requestDeviceCode(ctx, clientName)
}

// PollDeviceCode is the resolver for the pollDeviceCode field.
func (r *mutationResolver) PollDeviceCode(ctx context.Context, deviceCode string) (*model.DeviceLogin, error) {
	return r.pollDeviceCode(ctx, deviceCode)
}

// ApproveDevice is the resolver for the approveDevice field.
func (r *mutationResolver) ApproveDevice(ctx context.Context, userCode string) (*model.DeviceAuthorization, error) {
	return r.decideDevice(ctx, userCode, true)
}

// DenyDevice is the resolver for the denyDevice field.
func (r *mutationResolver) DenyDevice(ctx context.Context, userCode string) (*model.DeviceAuthorization, error) {
	return r.decideDevice(ctx, userCode, false)
}

// CreateEndpoint is the resolver for the createEndpoint field.
func (r *mutationResolver) CreateEndpoint(ctx context.Context, input model.CreateEndpointInput) (*model.Endpoint, error) {
	acc, tok, err := r.credential(ctx)
	if err != nil {
		return nil, err
	}
	answer, err := fromAnswerInput(input.Answer)
	if err != nil {
		return nil, err
	}
	filters, _, err := filtersOf(input.Filters, input.FilterTexts)
	if err != nil {
		return nil, err
	}
	retention, err := retentionOf(input.Retention)
	if err != nil {
		return nil, err
	}
	qp, err := queuePatch(input.Queue)
	if err != nil {
		return nil, err
	}
	queue, err := qp.Apply(nil)
	if err != nil {
		return nil, err
	}
	ep, err := r.Service.CreateEndpoint(ctx, acc.ID, tok.MemberID, domain.EndpointSettings{
		Name: input.Name, Mode: domain.EndpointMode(input.Mode), Target: deref(input.Target), ResponseCapture: deref(input.ResponseCapture),
		Answer: answer, Handshakes: fromHandshakesInput(input.Handshakes).Settings(), Filters: filters, Retention: deref(retention),
		Queue: queue,
	})
	if err != nil {
		return nil, err
	}
	return r.toEndpoint(ep), nil
}

// UpdateEndpoint is the resolver for the updateEndpoint field.
func (r *mutationResolver) UpdateEndpoint(ctx context.Context, id string, input model.UpdateEndpointInput) (*model.Endpoint, error) {
	acc, tok, err := r.credential(ctx)
	if err != nil {
		return nil, err
	}
	patch, err := toPatch(input)
	if err != nil {
		return nil, err
	}
	ep, err := r.Service.UpdateEndpoint(ctx, acc.ID, tok.MemberID, id, patch)
	if err != nil {
		return nil, err
	}
	return r.toEndpoint(ep), nil
}

// DeleteEndpoint is the resolver for the deleteEndpoint field.
func (r *mutationResolver) DeleteEndpoint(ctx context.Context, id string) (bool, error) {
	acc, tok, err := r.credential(ctx)
	if err != nil {
		return false, err
	}
	if err := r.Service.DeleteEndpoint(ctx, acc.ID, tok.MemberID, id); err != nil {
		return false, err
	}
	return true, nil
}

// IssueSmeeKey is the resolver for the issueSmeeKey field.
func (r *mutationResolver) IssueSmeeKey(ctx context.Context, endpointID string) (*model.SmeeStream, error) {
	acc, tok, err := r.credential(ctx)
	if err != nil {
		return nil, err
	}
	key, ep, err := r.Service.IssueSmeeKey(ctx, acc.ID, tok.MemberID, endpointID)
	if err != nil {
		return nil, err
	}
	return &model.SmeeStream{Endpoint: r.toEndpoint(ep), URL: r.smeeStreamURL(ep.ID, key)}, nil
}

// RevokeSmeeKey is the resolver for the revokeSmeeKey field.
func (r *mutationResolver) RevokeSmeeKey(ctx context.Context, endpointID string) (*model.Endpoint, error) {
	acc, tok, err := r.credential(ctx)
	if err != nil {
		return nil, err
	}
	ep, err := r.Service.RevokeSmeeKey(ctx, acc.ID, tok.MemberID, endpointID)
	if err != nil {
		return nil, err
	}
	return r.toEndpoint(ep), nil
}

// SetInspectorAnswer is the resolver for the setInspectorAnswer field.
func (r *mutationResolver) SetInspectorAnswer(ctx context.Context, id string, answer *model.AnswerInput, handshakes *model.HandshakesInput) (*model.Inspector, error) {
	// Input first: a malformed answer spends none of the address's rate.
	a, err := fromAnswerInput(answer)
	if err != nil {
		return nil, err
	}
	if a != nil {
		if err := a.Validate(); err != nil {
			return nil, err
		}
	}
	// Anonymous writes to the log are limited as createInspector is.
	if err := r.limitAnonymous(ctx); err != nil {
		return nil, err
	}
	in, err := r.Service.SetInspectorAnswers(ctx, id, a, fromHandshakesInput(handshakes))
	if err != nil {
		return nil, err
	}
	return r.toInspector(in), nil
}

// RetryDelivery is the resolver for the retryDelivery field.
func (r *mutationResolver) RetryDelivery(ctx context.Context, id string, edit *model.RequestEditInput) (*model.Delivery, error) {
	acc, err := r.account(ctx)
	if err != nil {
		return nil, err
	}
	e, err := fromEditInput(edit)
	if err != nil {
		return nil, err
	}
	d, err := r.Service.RetryDelivery(ctx, acc.ID, id, e)
	if err != nil {
		return nil, err
	}
	return toDelivery(d), nil
}

// RedriveDead is the resolver for the redriveDead field.
func (r *mutationResolver) RedriveDead(ctx context.Context, endpoint string) (int, error) {
	acc, tok, err := r.credential(ctx)
	if err != nil {
		return 0, err
	}
	if err := r.limitBulk(acc.ID); err != nil {
		return 0, err
	}
	res, err := r.Service.RedriveDead(ctx, acc.ID, tok.MemberID, endpoint, "")
	return res.Count, err
}

// RedriveDeadPage is the resolver for the redriveDeadPage field.
func (r *mutationResolver) RedriveDeadPage(ctx context.Context, endpoint string, after *string) (*model.RedrivePage, error) {
	return r.redriveDeadPage(ctx, endpoint, after)
}

// CompleteForward is the resolver for the completeForward field.
func (r *mutationResolver) CompleteForward(ctx context.Context, input model.CompleteForwardInput) (bool, error) {
	return r.completeForward(ctx, input)
}

// Inspector is the resolver for the inspector field.
func (r *queryResolver) Inspector(ctx context.Context, id string) (*model.Inspector, error) {
	in, err := r.Views.Inspector(ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return r.toInspector(in), nil
}

// MemberInvite is the resolver for the memberInvite field.
func (r *queryResolver) MemberInvite(ctx context.Context, code string) (*model.InvitePreview, error) {
	return r.memberInvite(ctx, code)
}

// Me is the resolver for the me field.
func (r *queryResolver) Me(ctx context.Context) (*model.Account, error) {
	acc, err := r.account(ctx)
	if errors.Is(err, domain.ErrUnauthenticated) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &model.Account{ID: acc.ID, Name: acc.Name}, nil
}

// AccountsUsage is the resolver for the accountsUsage field.
func (r *queryResolver) AccountsUsage(ctx context.Context, account *string, first *int) ([]*model.AccountUsage, error) {
	return r.accountsUsage(ctx, account, first)
}

// Tokens is the resolver for the tokens field.
func (r *queryResolver) Tokens(ctx context.Context) ([]*model.Token, error) {
	return r.tokens(ctx)
}

// SignupMode is the resolver for the signupMode field.
func (r *queryResolver) SignupMode(ctx context.Context) (model.SignupMode, error) {
	return model.SignupMode(strings.ToUpper(string(r.Service.SignupMode()))), nil
}

// DeviceAuthorization is the resolver for the deviceAuthorization field.
func (r *queryResolver) DeviceAuthorization(ctx context.Context, userCode string) (*model.DeviceAuthorization, error) {
	return r.deviceAuthorization(ctx, userCode)
}

// Endpoints is the resolver for the endpoints field.
func (r *queryResolver) Endpoints(ctx context.Context, first *int, after *string) ([]*model.Endpoint, error) {
	acc, err := r.account(ctx)
	if err != nil {
		return nil, err
	}
	eps, err := r.endpointsPage(ctx, acc.ID, first, after)
	if err != nil {
		return nil, err
	}
	out := make([]*model.Endpoint, 0, len(eps))
	for _, e := range eps {
		out = append(out, r.toEndpoint(e))
	}
	return out, nil
}

// Endpoint is the resolver for the endpoint field.
func (r *queryResolver) Endpoint(ctx context.Context, id string) (*model.Endpoint, error) {
	ep, err := r.ownedEndpoint(ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return r.toEndpoint(ep), nil
}

// QueuedDeliveries is the resolver for the queuedDeliveries field.
func (r *queryResolver) QueuedDeliveries(ctx context.Context, endpoint string, state *string, first *int) ([]*model.QueuedDelivery, error) {
	return r.queuedDeliveries(ctx, endpoint, state, first)
}

// Delivery is the resolver for the delivery field.
func (r *queryResolver) Delivery(ctx context.Context, id string) (*model.Delivery, error) {
	d, err := r.visibleDelivery(ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return toDelivery(d), nil
}

// Events is the resolver for the events field.
func (r *queryResolver) Events(ctx context.Context, after *string, first *int) (*model.EventConnection, error) {
	return r.events(ctx, deref(after), deref(first))
}

// Deliveries is the resolver for the deliveries field.
func (r *subscriptionResolver) Deliveries(ctx context.Context, address string, since *string) (<-chan *model.Delivery, error) {
	a, err := r.canWatch(ctx, address)
	if err != nil {
		return nil, err
	}
	return r.watchDeliveries(ctx, a, since)
}

// ForwardRequests is the resolver for the forwardRequests field.
func (r *subscriptionResolver) ForwardRequests(ctx context.Context, endpointID string, target *string, primary *bool, filters []*model.FilterInput) (<-chan *model.ForwardRequest, error) {
	fs, err := fromFilterInputs(filters)
	if err != nil {
		return nil, err
	}
	return r.attachAgent(ctx, endpointID, deref(target), primary != nil && *primary, fs)
}

// Account returns generated.AccountResolver implementation.
func (r *Resolver) Account() generated.AccountResolver { return &accountResolver{r} }

// Delivery returns generated.DeliveryResolver implementation.
func (r *Resolver) Delivery() generated.DeliveryResolver { return &deliveryResolver{r} }

// Endpoint returns generated.EndpointResolver implementation.
func (r *Resolver) Endpoint() generated.EndpointResolver { return &endpointResolver{r} }

// Inspector returns generated.InspectorResolver implementation.
func (r *Resolver) Inspector() generated.InspectorResolver { return &inspectorResolver{r} }

// Mutation returns generated.MutationResolver implementation.
func (r *Resolver) Mutation() generated.MutationResolver { return &mutationResolver{r} }

// Query returns generated.QueryResolver implementation.
func (r *Resolver) Query() generated.QueryResolver { return &queryResolver{r} }

// Subscription returns generated.SubscriptionResolver implementation.
func (r *Resolver) Subscription() generated.SubscriptionResolver { return &subscriptionResolver{r} }

type accountResolver struct{ *Resolver }
type deliveryResolver struct{ *Resolver }
type endpointResolver struct{ *Resolver }
type inspectorResolver struct{ *Resolver }
type mutationResolver struct{ *Resolver }
type queryResolver struct{ *Resolver }
type subscriptionResolver struct{ *Resolver }
