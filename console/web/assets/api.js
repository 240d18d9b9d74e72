// @ts-check
// The GraphQL documents the console sends. Field names follow schema.graphqls.

/** Fields a history row needs; the detail pane fetches the rest on demand. */
export const ROW_FIELDS = `
  id cursor address method path bodySize complete receivedAt responseStatus
  attempts { id status startedAt durationMs error retry late queued role possibleDuplicate signature fidelity { status differences } edit { method path unsetHeaders setHeaders { name value } bodyBase64 } }
  provider { name eventType deliveryId } duplicates hint
`;

/** Every field of a delivery, for the detail pane. */
export const DETAIL_FIELDS = `
  ${ROW_FIELDS}
  headers { name value }
  body bodyBase64 bodyUnread remoteAddress
  responseHeaders { name value }
  responseBody responseNotCaptured
  why { status summary facts { at text } }
`;

/** An address's own answer and handshakes (secrets come back masked). */
export const ANSWER_FIELDS = `answer { status headers { name value } body } handshakes { enabled metaVerifyTokenSet zoomSecretSet inProxy }`;

export const ENDPOINT_FIELDS = `id name url mode target responseCapture agentConnected agentCount createdAt refusedRequests filters { text } retention { window isDefault max deletedBefore } ${ANSWER_FIELDS}`;

const LISTENER_FIELDS = `listeners { agentId target primary connectedAt filters { text } }`;

export const CREATE_INSPECTOR = `mutation CreateInspector($smee: Boolean) { createInspector(smee: $smee) { id url smee } }`;

export const SIGN_UP = `mutation SignUp($name: String!, $invite: String) {
  signUp(name: $name, invite: $invite) { token account { id name } }
}`;

export const MEMBER_FIELDS = `id login role joinedAt you`;

export const ME = `query { me { id name member { ${MEMBER_FIELDS} } } }`;

// A sign-in's answer sets the session cookie; its body never holds the token.
const SESSION_FIELDS = `account { id name } member { ${MEMBER_FIELDS} } expiresAt`;

export const SIGN_UP_PASSWORD = `mutation SignUpWithPassword($name: String!, $login: String!, $password: String!, $invite: String) {
  signUpWithPassword(name: $name, login: $login, password: $password, invite: $invite) { ${SESSION_FIELDS} }
}`;

export const SIGN_IN_PASSWORD = `mutation SignIn($login: String!, $password: String!) {
  signIn(login: $login, password: $password) { ${SESSION_FIELDS} }
}`;

export const SIGN_OUT = `mutation { signOut }`;

export const SET_UP_SIGN_IN = `mutation SetUpSignIn($login: String!, $password: String!) {
  setUpSignIn(login: $login, password: $password) { ${SESSION_FIELDS} }
}`;

export const MEMBER_INVITE = `query MemberInvite($code: String!) { memberInvite(code: $code) { accountName role expiresAt } }`;

export const JOIN_ACCOUNT = `mutation JoinAccount($code: String!, $login: String!, $password: String!) {
  joinAccount(code: $code, login: $login, password: $password) { ${SESSION_FIELDS} }
}`;

export const TEAM = `query { me { id member { ${MEMBER_FIELDS} } members { ${MEMBER_FIELDS} } } }`;

export const USAGE = `query { me { id usage { storedBytes storageQuota rate deliveries deliveriesLastDay refusals { reason count } } } }`;

export const ACTIVITY = `query { me { id activity(first: 50) { at type by subject detail text } } }`;

export const CREATE_MEMBER_INVITE = `mutation CreateMemberInvite($role: MemberRole) {
  createMemberInvite(role: $role) { code path role expiresAt }
}`;

export const REMOVE_MEMBER = `mutation RemoveMember($id: ID!) { removeMember(id: $id) }`;

export const CHANGE_PASSWORD = `mutation ChangePassword($current: String!, $next: String!) {
  changePassword(currentPassword: $current, newPassword: $next)
}`;

export const CHANGE_MEMBER_ROLE = `mutation ChangeMemberRole($id: ID!, $role: MemberRole!) {
  changeMemberRole(id: $id, role: $role) { ${MEMBER_FIELDS} }
}`;

/** A page of the account's Endpoints: first of them after the Endpoint after names (listEndpoints pages through them all). */
export const ENDPOINTS = `query Endpoints($first: Int, $after: ID) { endpoints(first: $first, after: $after) { ${ENDPOINT_FIELDS} } }`;

export const CREATE_ENDPOINT = `mutation CreateEndpoint($input: CreateEndpointInput!) {
  createEndpoint(input: $input) { ${ENDPOINT_FIELDS} }
}`;

export const UPDATE_ENDPOINT = `mutation UpdateEndpoint($id: ID!, $input: UpdateEndpointInput!) {
  updateEndpoint(id: $id, input: $input) { ${ENDPOINT_FIELDS} }
}`;

export const DELETE_ENDPOINT = `mutation DeleteEndpoint($id: ID!) { deleteEndpoint(id: $id) }`;

export const INSPECTOR = `query Inspector($id: ID!) {
  inspector(id: $id) { id url createdAt expiresAt expired refusedRequests smee ${ANSWER_FIELDS} }
}`;

export const SET_INSPECTOR_ANSWER = `mutation SetInspectorAnswer($id: ID!, $answer: AnswerInput, $handshakes: HandshakesInput) {
  setInspectorAnswer(id: $id, answer: $answer, handshakes: $handshakes) { id url createdAt expiresAt expired refusedRequests smee ${ANSWER_FIELDS} }
}`;

/** QUEUE_FIELDS are a QUEUE Endpoint's queue as its page shows it (null in other modes). */
export const QUEUE_FIELDS = 'queue { queued inFlight dead policy { ordering maxInFlight ratePerSecond maxAttempts backoffBase backoffCap } }';
export const ENDPOINT = `query Endpoint($id: ID!) { endpoint(id: $id) { ${ENDPOINT_FIELDS} ${LISTENER_FIELDS} ${QUEUE_FIELDS} } }`;

export const AGENT_STATUS = `query AgentStatus($id: ID!) {
  endpoint(id: $id) { id agentConnected agentCount mode target ${LISTENER_FIELDS} }
}`;

const PAGE = `deliveries(first: $first, after: $after, filter: $filter) {
  edges { cursor node { ${ROW_FIELDS} } }
  pageInfo { hasNextPage endCursor }
}`;

export const INSPECTOR_PAGE = `query InspectorPage($id: ID!, $first: Int, $after: String, $filter: DeliveryFilter) {
  inspector(id: $id) { id ${PAGE} }
}`;

export const ENDPOINT_PAGE = `query EndpointPage($id: ID!, $first: Int, $after: String, $filter: DeliveryFilter) {
  endpoint(id: $id) { id ${PAGE} }
}`;

export const DELIVERY = `query Delivery($id: ID!) { delivery(id: $id) { ${DETAIL_FIELDS} } }`;

/** The relay's comparison of two attempts of a delivery (compare.js renders it). */
export const COMPARE = `query Compare($id: ID!, $a: String!, $b: String!) { delivery(id: $id) { id compare(a: $a, b: $b) {
  request { where before after } response { where before after } responseCompared note } } }`;

export const RETRY = `mutation Retry($id: ID!, $edit: RequestEditInput) { retryDelivery(id: $id, edit: $edit) { ${DETAIL_FIELDS} } }`;

export const REFUSED_OFFLINE = `query RefusedOffline($id: ID!) {
  endpoint(id: $id) { id deliveries(first: 100, filter: { refusedOffline: true }) { nodes { id } pageInfo { hasNextPage } } }
}`;

export const LIVE_DELIVERIES = `subscription Live($address: ID!, $since: String) {
  deliveries(address: $address, since: $since) { ${ROW_FIELDS} }
}`;

export const TOKEN_FIELDS = `id name createdAt lastUsedAt expiresAt current member session`;

export const TOKENS = `query { tokens { ${TOKEN_FIELDS} } }`;

export const CREATE_TOKEN = `mutation CreateToken($name: String!, $expiresIn: String) {
  createToken(name: $name, expiresIn: $expiresIn) { token { ${TOKEN_FIELDS} } secret }
}`;

export const REVOKE_TOKEN = `mutation RevokeToken($id: ID!) { revokeToken(id: $id) }`;

export const DEVICE_FIELDS = `clientName requestedAt expiresAt status`;

export const DEVICE_AUTHORIZATION = `query DeviceAuthorization($code: String!) {
  deviceAuthorization(userCode: $code) { ${DEVICE_FIELDS} }
}`;

export const APPROVE_DEVICE = `mutation ApproveDevice($code: String!) { approveDevice(userCode: $code) { ${DEVICE_FIELDS} } }`;

export const DENY_DEVICE = `mutation DenyDevice($code: String!) { denyDevice(userCode: $code) { ${DEVICE_FIELDS} } }`;

const STATS_BUCKET_FIELDS = 'start deliveries status2xx status3xx status4xx status5xx pending filtered refused answers p50Ms p95Ms offlineSeconds';
const STATS_FIELDS = `stats(range: $range) { range bucketSeconds from to totals { ${STATS_BUCKET_FIELDS} } buckets { ${STATS_BUCKET_FIELDS} } }`;
export const ENDPOINT_STATS = `query EndpointStats($id: ID!, $range: StatsRange) { endpoint(id: $id) { id ${STATS_FIELDS} } }`;
export const INSPECTOR_STATS = `query InspectorStats($id: ID!, $range: StatsRange) { inspector(id: $id) { id ${STATS_FIELDS} } }`;
/**
 * The last hour of a page of the account's Endpoints, as the home page's
 * sparklines draw it: first of them after the Endpoint after names (charts.js
 * sparklines asks for SPARKLINES_PAGE at a time, the most the default cost budget holds).
 */
export const ENDPOINTS_STATS = `query EndpointsStats($first: Int, $after: ID) {
  endpoints(first: $first, after: $after) { id stats(range: HOUR) { totals { deliveries status4xx status5xx } buckets { start deliveries status4xx status5xx } } }
}`;
