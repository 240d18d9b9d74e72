package desktop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/relayhq/relay/agentcli"
	"github.com/relayhq/relay/apiclient"
)

// Window is what the app needs of the toolkit's window (Wails in
// cmd/relay-desktop); the package itself stays free of cgo.
type Window interface {
	Emit(event string, data any)
	ExecJS(js string)
	Show()
	Hide()
	Quit()
}

// Notifier shows a desktop notification.
type Notifier func(title, body string) error

// maxRows bounds the live list kept in memory; older rows stay in the
// relay's history.
const maxRows = 500

// Notice is a notification the app sent (or tried to).
type Notice struct {
	Time  time.Time `json:"time"`
	Title string    `json:"title"`
	Body  string    `json:"body"`
	Error string    `json:"error,omitempty"` // why it could not be shown
}

// App is the desktop agent: the signed-in account, the routes switched
// on, the agent's connection and the deliveries it forwarded.
type App struct {
	store  Store
	notify Notifier
	log    *slog.Logger
	run    *runner

	mu       sync.Mutex
	win      Window
	creds    Credentials
	where    Where
	account  Account
	signErr  string            // why the stored sign-in did not work
	targets  map[string]string // Endpoint ID → local target typed in the window
	on       map[string]bool   // Endpoint ID → switch
	conn     ConnState
	rows     []Row
	roles    map[string]bool // Endpoint ID → this app is its primary listener
	listed   []string        // the Endpoints' ids in the order Endpoints last listed them
	notices  []Notice
	hidden   bool
	quitting bool
	pageUp   bool // the page's script has called in (the hook can run scripts)

	trayMu       sync.Mutex       // orders the calls of trayView
	trayView     func(TrayStatus) // the tray icon, when there is one (SetTray)
	trayStop     func()           // takes the tray icon down (StartTray)
	failedHidden int              // failed deliveries since the window was hidden

	routes  routesFile
	hook    *hook
	started chan struct{} // closed when Start has read the stored sign-in
}

// Options configure New.
type Options struct {
	Store  Store
	Notify Notifier
	Log    *slog.Logger
	// Engine serves routes; nil is the agent library's.
	Engine engine
}

// New returns the app; Start attaches it to its window.
func New(o Options) *App {
	a := &App{
		store:   o.Store,
		notify:  o.Notify,
		log:     o.Log,
		targets: map[string]string{},
		on:      map[string]bool{},
		conn:    ConnState{State: StateOff, Since: time.Now()},
		started: make(chan struct{}),
		routes:  routesFileFor(o.Store),
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.notify == nil {
		a.notify = func(string, string) error { return errors.New("no notification service") }
	}
	eng := o.Engine
	if eng == nil {
		eng = serveAgent
	}
	a.run = &runner{engine: eng, ev: a}
	return a
}

// Start attaches the window and signs in with what is stored (this
// program's sign-in or `relay login`'s).
func (a *App) Start(ctx context.Context, w Window) {
	defer close(a.started)
	a.mu.Lock()
	a.win = w
	a.mu.Unlock()
	c, where, err := a.store.Load()
	if err != nil {
		a.setSignErr(err.Error())
		return
	}
	a.mu.Lock()
	a.creds.Server = c.Server
	a.mu.Unlock()
	if c.Token == "" {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	acct, err := newAPI(c.Server, c.Token).me(cctx)
	if errors.Is(err, errNoAccount) || isRefusal(err) {
		a.setSignErr(fmt.Sprintf("the stored token for %s was refused: %v; sign in again", c.Server, err))
		return
	}
	a.mu.Lock()
	a.creds, a.where, a.account = c, where, acct
	if err != nil {
		// The relay may be down for now; the sign-in stands, the window
		// says why the list is empty, and the agent keeps trying.
		a.signErr = fmt.Sprintf("could not reach %s: %v", c.Server, err)
	}
	for _, r := range a.routes.load(c.Server) {
		a.targets[r.EndpointID] = r.Target
		a.on[r.EndpointID] = r.On
	}
	a.mu.Unlock()
	a.applyRoutes()
}

// Shutdown stops the agent and waits until its session is closed, so the
// relay records the disconnect.
func (a *App) Shutdown() {
	a.run.stop()
	if a.hook != nil {
		a.hook.close()
	}
	a.mu.Lock()
	stop := a.trayStop
	a.trayStop, a.trayView = nil, nil
	a.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// BeforeClose decides what closing the window does: hide it and keep
// serving (the tray icon's menu or starting the program again shows it),
// unless the user asked to quit.
func (a *App) BeforeClose() (prevent bool) {
	a.mu.Lock()
	quitting := a.quitting
	a.mu.Unlock()
	if quitting {
		return false
	}
	a.setHidden(true)
	if w := a.window(); w != nil {
		w.Hide()
	}
	return true
}

// ShowWindow brings the window back (the tray's menu, a second launch of
// the program).
func (a *App) ShowWindow() {
	a.setHidden(false)
	if w := a.window(); w != nil {
		w.Show()
	}
}

// Quit ends the program cleanly.
func (a *App) Quit() {
	a.mu.Lock()
	a.quitting = true
	w := a.win
	a.mu.Unlock()
	if w != nil {
		w.Quit()
	}
}

func (a *App) window() Window {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.win
}

func (a *App) setHidden(h bool) {
	a.mu.Lock()
	a.hidden = h
	if !h {
		a.failedHidden = 0 // seen now: the rows show them
	}
	a.mu.Unlock()
	a.trayChanged()
}

func (a *App) setSignErr(s string) {
	a.mu.Lock()
	a.signErr = s
	a.mu.Unlock()
}

func (a *App) emit(event string, data any) {
	if w := a.window(); w != nil {
		w.Emit(event, data)
	}
}

func (a *App) api() (API, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return newAPI(a.creds.Server, a.creds.Token), a.creds.Token != ""
}

// connState and forwarded receive the agent's events.
func (a *App) connState(s ConnState) {
	a.mu.Lock()
	a.conn = s
	a.mu.Unlock()
	a.log.Info("agent", "state", s.State, "reason", s.Reason)
	a.emit("conn", s)
	a.trayChanged()
}

func (a *App) role(endpointID string, primary bool) {
	a.mu.Lock()
	if a.roles == nil {
		a.roles = map[string]bool{}
	}
	a.roles[endpointID] = primary
	a.mu.Unlock()
	a.log.Info("agent role", "endpoint_id", endpointID, "primary", primary)
	a.emit("role", Role{EndpointID: endpointID, Primary: primary})
}

// Role is whether this app answers an Endpoint's senders ("role" event).
type Role struct {
	EndpointID string `json:"endpointId"`
	Primary    bool   `json:"primary"`
}

func (a *App) forwarded(r Row) {
	a.mu.Lock()
	a.rows = append(a.rows, r)
	if len(a.rows) > maxRows {
		a.rows = slices.Delete(a.rows, 0, len(a.rows)-maxRows)
	}
	hidden := a.hidden
	if r.Failed() && hidden {
		a.failedHidden++
	}
	a.mu.Unlock()
	a.emit("row", r)
	if r.Failed() && hidden {
		a.trayChanged()
		a.sendNotice("Delivery failed", failureText(r))
	}
}

func failureText(r Row) string {
	if r.Error != "" {
		return fmt.Sprintf("%s %s: %s", r.Method, r.Path, r.Error)
	}
	return fmt.Sprintf("%s %s → %d", r.Method, r.Path, r.Status)
}

func (a *App) sendNotice(title, body string) {
	n := Notice{Time: time.Now(), Title: title, Body: body}
	if err := a.notify(title, body); err != nil {
		n.Error = err.Error()
		a.log.Warn("notification not shown", "error", err)
	}
	a.mu.Lock()
	a.notices = append(a.notices, n)
	if len(a.notices) > 50 {
		a.notices = a.notices[1:]
	}
	a.mu.Unlock()
}

// routes are the Endpoints switched on, in a stable order.
func (a *App) routesLocked() []Route {
	var rs []Route
	for id, on := range a.on {
		if on {
			rs = append(rs, Route{EndpointID: id, Target: a.targets[id]})
		}
	}
	slices.SortFunc(rs, func(x, y Route) int { return strings.Compare(x.EndpointID, y.EndpointID) })
	return rs
}

// applyRoutes runs the agent for the switches that are on and remembers
// them for the next start.
func (a *App) applyRoutes() {
	a.mu.Lock()
	rs, server, token := a.routesLocked(), a.creds.Server, a.creds.Token
	var saved []savedRoute
	for id, target := range a.targets {
		saved = append(saved, savedRoute{EndpointID: id, Target: target, On: a.on[id]})
	}
	slices.SortFunc(saved, func(x, y savedRoute) int { return strings.Compare(x.EndpointID, y.EndpointID) })
	a.mu.Unlock()
	if token == "" {
		return
	}
	if err := a.routes.save(server, saved); err != nil {
		a.log.Warn("switches not saved", "error", err)
	}
	a.run.set(server, token, rs)
}

// isRefusal reports whether err is the relay refusing the token.
func isRefusal(err error) bool {
	var e *apiclient.Error
	return errors.As(err, &e) && e.Refusal()
}

func (a *App) storePath() string {
	if a.store.Config == nil {
		return ""
	}
	return a.store.Config.Path()
}

// Status is the window's state.
type Status struct {
	SignedIn  bool      `json:"signedIn"`
	Server    string    `json:"server"`
	Account   Account   `json:"account"`
	Stored    Where     `json:"stored"`    // where the token is kept
	StorePath string    `json:"storePath"` // the config file
	Error     string    `json:"error,omitempty"`
	Conn      ConnState `json:"conn"`
	Rows      []Row     `json:"rows"`
	// Roles: for each Endpoint this app serves, whether it is the primary
	// listener (its answers go to the senders) or receives copies.
	Roles   map[string]bool `json:"roles"`
	Notices []Notice        `json:"notices"`
	Hidden  bool            `json:"hidden"`
}

func (a *App) status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Status{
		SignedIn:  a.creds.Token != "",
		Server:    a.creds.Server,
		Account:   a.account,
		Stored:    a.where,
		StorePath: a.storePath(),
		Error:     a.signErr,
		Conn:      a.conn,
		Rows:      slices.Clone(a.rows),
		Roles:     maps.Clone(a.roles),
		Notices:   slices.Clone(a.notices),
		Hidden:    a.hidden,
	}
}

// UI is the part of the app the window's JavaScript calls (bound by
// Wails as window.go.desktop.UI).
type UI struct{ app *App }

// Bindings returns what the window may call.
func (a *App) Bindings() *UI { return &UI{app: a} }

// Status returns the whole state; the window calls it once on load and
// then follows the "conn" and "row" events.
func (u *UI) Status() Status {
	// The toolkit runs Start alongside loading the page: a page that asks
	// first must not be told it is signed out.
	<-u.app.started
	u.app.mu.Lock()
	u.app.pageUp = true
	u.app.mu.Unlock()
	return u.app.status()
}

// SignIn checks the token against the relay and stores both.
func (u *UI) SignIn(server, token string) (Status, error) {
	a := u.app
	server, token = strings.TrimSpace(server), strings.TrimSpace(token)
	if server == "" || token == "" {
		return a.status(), errors.New("give the relay's URL and a token")
	}
	if _, err := websocketCheck(server); err != nil {
		return a.status(), err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	acct, err := newAPI(server, token).me(ctx)
	if err != nil {
		return a.status(), fmt.Errorf("sign in to %s: %w", server, err)
	}
	where, err := a.store.Save(Credentials{Server: server, Token: token})
	if err != nil {
		return a.status(), err
	}
	a.run.stop()
	a.mu.Lock()
	a.creds, a.where, a.account, a.signErr = Credentials{Server: server, Token: token}, where, acct, ""
	clear(a.on)
	clear(a.targets)
	a.listed = nil
	a.mu.Unlock()
	a.routes.remove()
	return a.status(), nil
}

// SignOut stops the agent and forgets the token.
func (u *UI) SignOut() (Status, error) {
	a := u.app
	a.run.stop()
	a.mu.Lock()
	server := a.creds.Server
	a.creds.Token, a.where, a.account = "", Nowhere, Account{}
	clear(a.on)
	clear(a.targets)
	a.listed = nil
	a.mu.Unlock()
	a.routes.remove()
	a.connState(ConnState{State: StateOff, Since: time.Now()})
	return a.status(), a.store.Forget(server)
}

// Endpoints lists the account's Endpoints with this agent's route for each.
func (u *UI) Endpoints() ([]Endpoint, error) {
	a := u.app
	api, ok := a.api()
	if !ok {
		return nil, errors.New("not signed in")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	eps, err := api.endpoints(ctx)
	if err != nil {
		return nil, fmt.Errorf("list Endpoints: %w", err)
	}
	a.mu.Lock()
	a.signErr = "" // the relay answers again
	a.listed = a.listed[:0]
	for i := range eps {
		a.listed = append(a.listed, eps[i].ID)
		e := &eps[i]
		e.LocalTarget = a.targets[e.ID]
		if e.LocalTarget == "" {
			e.LocalTarget = e.Target
		}
		e.Serving = a.on[e.ID]
	}
	// A switch of an Endpoint deleted elsewhere could never be turned
	// off in the window: drop it (the relay would refuse it anyway).
	gone := false
	for id := range a.targets {
		if !slices.ContainsFunc(eps, func(e Endpoint) bool { return e.ID == id }) {
			delete(a.targets, id)
			gone = gone || a.on[id]
			delete(a.on, id)
		}
	}
	a.mu.Unlock()
	if gone {
		a.applyRoutes()
	}
	return eps, nil
}

// CreateEndpoint creates a PROXY Endpoint forwarding to target.
func (u *UI) CreateEndpoint(name, target string) (Endpoint, error) {
	api, ok := u.app.api()
	if !ok {
		return Endpoint{}, errors.New("not signed in")
	}
	if strings.TrimSpace(name) == "" {
		return Endpoint{}, errors.New("give the Endpoint a name")
	}
	if target != "" {
		if _, err := agentcli.ParseTarget(target); err != nil {
			return Endpoint{}, fmt.Errorf("local target %q: %w", target, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	e, err := api.createEndpoint(ctx, strings.TrimSpace(name), target)
	if err != nil {
		return Endpoint{}, fmt.Errorf("create Endpoint: %w", err)
	}
	e.LocalTarget = e.Target
	return e, nil
}

// Connect switches the agent on for the Endpoint, forwarding to target.
// Every Endpoint switched on shares one connection.
func (u *UI) Connect(endpointID, target string) error {
	a := u.app
	// An empty target forwards to the Endpoint's own, as the relay stores it.
	target = strings.TrimSpace(target)
	if target != "" {
		if _, err := agentcli.ParseTarget(target); err != nil {
			return fmt.Errorf("local target %q: %w", target, err)
		}
	}
	if _, ok := a.api(); !ok {
		return errors.New("not signed in")
	}
	a.mu.Lock()
	a.targets[endpointID], a.on[endpointID] = target, true
	a.mu.Unlock()
	a.applyRoutes()
	return nil
}

// Disconnect switches the agent off for the Endpoint.
func (u *UI) Disconnect(endpointID string) error {
	a := u.app
	a.mu.Lock()
	delete(a.on, endpointID)
	a.mu.Unlock()
	a.applyRoutes()
	return nil
}

// Delivery returns one delivery with everything the detail pane shows.
func (u *UI) Delivery(id string) (json.RawMessage, error) {
	api, ok := u.app.api()
	if !ok {
		return nil, errors.New("not signed in")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return api.delivery(ctx, id)
}

// Compare returns the relay's comparison of two sides of a delivery
// (attempt numbers, or original), which the detail pane renders.
func (u *UI) Compare(id, a, b string) (json.RawMessage, error) {
	api, ok := u.app.api()
	if !ok {
		return nil, errors.New("not signed in")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := api.compare(ctx, id, a, b)
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	return c, nil
}

// Stats returns the last hour (60 one-minute buckets and their totals) of
// the Endpoints endpointIDs names, by id, for the charts on their cards:
// the window names the cards on screen, never the whole list. They are
// read as runs of neighbours in the list Endpoints last returned (each
// from the Endpoint listed before it), nine a request (statsPage), one
// request at a time; an id that list does not hold is not read. Those
// read before a request failed are returned, the error logged; a card
// whose stats are missing keeps its last chart.
func (u *UI) Stats(endpointIDs []string) (map[string]json.RawMessage, error) {
	api, ok := u.app.api()
	if !ok {
		return nil, errors.New("not signed in")
	}
	u.app.mu.Lock()
	runs := statsRuns(u.app.listed, endpointIDs)
	u.app.mu.Unlock()
	// A minute for all the pages; each request is bounded by httpClient.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string]json.RawMessage{}
	var err error
	for _, run := range runs {
		var st map[string]json.RawMessage
		st, err = api.stats(ctx, run.after, run.ids)
		maps.Copy(out, st)
		if err != nil {
			break
		}
	}
	if err != nil && len(out) == 0 {
		return nil, fmt.Errorf("stats: %w", err)
	}
	if err != nil {
		u.app.log.Warn("stats partly read", "read", len(out), "of", len(endpointIDs), "error", err)
	}
	return out, nil
}

// statsRun is a run of neighbours in the endpoints list: ids, listed
// right after the Endpoint after (empty: ids begin the list).
type statsRun struct {
	after string
	ids   []string
}

// statsRuns splits ids into runs of neighbours in listed, in its order;
// ids listed does not hold are left out.
func statsRuns(listed, ids []string) []statsRun {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var runs []statsRun
	for i, id := range listed {
		if !want[id] {
			continue
		}
		if i == 0 || len(runs) == 0 || !want[listed[i-1]] {
			after := ""
			if i > 0 {
				after = listed[i-1]
			}
			runs = append(runs, statsRun{after: after})
		}
		runs[len(runs)-1].ids = append(runs[len(runs)-1].ids, id)
	}
	return runs
}

// Retry sends the delivery again through the relay (retryDelivery): a new
// attempt, forwarded by whichever agent serves the Endpoint. edit is the
// detail pane's Edit and retry (a RequestEditInput: what changed), null to
// send the request as recorded.
func (u *UI) Retry(id string, edit json.RawMessage) (json.RawMessage, error) {
	api, ok := u.app.api()
	if !ok {
		return nil, errors.New("not signed in")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := api.retry(ctx, id, edit)
	if err != nil {
		return nil, fmt.Errorf("retry: %w", err)
	}
	return d, nil
}

// SetVisible is reported by the window when it is shown or hidden.
func (u *UI) SetVisible(visible bool) { u.app.setHidden(!visible) }

// Hide hides the window; the agent keeps serving.
func (u *UI) Hide() { u.app.BeforeClose() }

// Quit closes the agent's sessions and ends the program.
func (u *UI) Quit() { u.app.Quit() }

// HookResult carries an answer of the test hook's script back (see hook.go).
func (u *UI) HookResult(id, result string) { u.app.hookResult(id, result) }

// websocketCheck validates the relay URL the way the agent will use it.
func websocketCheck(server string) (string, error) {
	s := strings.TrimSpace(server)
	if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
		return "", fmt.Errorf("relay URL %q: must start with http:// or https://", server)
	}
	return s, nil
}
