// The desktop window's Go side as desktop/frontend/app.js sees it: the
// bindings Wails exposes as window.go.desktop.UI (desktop/app.go, type UI)
// and the events it emits. Field names are the Go types' JSON names;
// desktop/frontend_types_test.go checks them.

declare namespace Desktop {
  /** desktop.Status: the window's whole state. */
  interface Status {
    signedIn: boolean;
    server: string;
    account: Account;
    /** Where the token is kept: 'keyring', 'file' or ''. */
    stored: string;
    storePath: string;
    error?: string;
    conn: ConnState;
    rows: Row[] | null;
    roles: Record<string, boolean> | null;
    notices: Notice[] | null;
    hidden: boolean;
  }

  /** desktop.Account */
  interface Account {
    id: string;
    name: string;
  }

  /** desktop.ConnState: the agent's connection ("conn" event). */
  interface ConnState {
    state: string;
    reason?: string;
    nextTry?: string;
    since: string;
  }

  /** desktop.Row: one forwarded request ("row" event). */
  interface Row {
    deliveryId: string;
    attemptId: string;
    endpointId: string;
    time: string;
    method: string;
    path: string;
    status: number;
    durationMs: number;
    error?: string;
  }

  /** desktop.Role: whether this app answers an Endpoint's senders ("role" event). */
  interface Role {
    endpointId: string;
    primary: boolean;
  }

  /** desktop.Notice: a notification the app sent (or tried to). */
  interface Notice {
    time: string;
    title: string;
    body: string;
    error?: string;
  }

  /** desktop.Endpoint: the relay's view plus this agent's route for it. */
  interface Endpoint {
    id: string;
    name: string;
    url: string;
    mode: string;
    target: string;
    agentConnected: boolean;
    agentCount: number;
    filters: Array<{ text: string }> | null;
    answer: { status: number } | null;
    handshakes: { enabled: string[] | null } | null;
    queue: { queued: number; inFlight: number; dead: number } | null;
    localTarget: string;
    serving: boolean;
  }

  /** The bound methods of desktop.UI; each answers a promise. */
  interface UI {
    Status(): Promise<Status>;
    SignIn(server: string, token: string): Promise<Status>;
    SignOut(): Promise<Status>;
    Endpoints(): Promise<Endpoint[]>;
    CreateEndpoint(name: string, target: string): Promise<Endpoint>;
    Connect(endpointID: string, target: string): Promise<void>;
    Disconnect(endpointID: string): Promise<void>;
    /** The relay's Delivery, as the console's detail pane reads it. */
    Delivery(id: string): Promise<GQL.Delivery>;
    Compare(id: string, a: string, b: string): Promise<GQL.AttemptComparison>;
    Stats(endpointIDs: string[]): Promise<Record<string, GQL.Stats>>;
    Retry(id: string, edit: GQL.RequestEditInput | null): Promise<GQL.Delivery>;
    SetVisible(visible: boolean): Promise<void>;
    Hide(): Promise<void>;
    Quit(): Promise<void>;
    HookResult(id: string, result: string): Promise<void>;
  }

  /** What app.js uses of the Wails runtime. */
  interface Runtime {
    EventsOn(name: 'conn', fn: (c: ConnState) => void): void;
    EventsOn(name: 'role', fn: (r: Role) => void): void;
    EventsOn(name: 'row', fn: (r: Row) => void): void;
  }
}

interface Window {
  go: { desktop: { UI: Desktop.UI } };
  runtime: Desktop.Runtime;
}
