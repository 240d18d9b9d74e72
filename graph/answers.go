package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/relayhq/relay/graph/answersize"
	"github.com/relayhq/relay/internal/jsoncount"
)

// Defaults of the answer bounds (answersize): one answer may hold 32 MiB
// (a default page of 50 deliveries with every field and bodies of a few
// hundred KiB each), all answers at once 256 MiB.
const (
	DefaultMaxAnswer    = 32 << 20
	DefaultAnswerBudget = 256 << 20
)

// fieldOverhead is what a field adds to an answer besides its value: its
// name, quotes, colon and comma, on average.
const fieldOverhead = 16

// countAnswer is the field middleware that counts every field's encoded
// bytes against the answer's meter, so an answer stops growing (its
// fields turn into errors) once it passes a bound, instead of being built
// whole and refused after.
func countAnswer(ctx context.Context, next graphql.Resolver) (any, error) {
	res, err := next(ctx)
	if err != nil {
		return res, err
	}
	// A forward to an agent carries a body the ingress already admitted
	// against --proxy-body-budget, up to --max-body: counting it again
	// could fail a forward the relay accepted.
	if fc := graphql.GetFieldContext(ctx); fc != nil && fc.Object == "ForwardRequest" {
		return res, nil
	}
	n := int64(fieldOverhead)
	switch v := res.(type) {
	case string:
		n += answersize.EncodedLen(v)
	case *string:
		if v != nil {
			n += answersize.EncodedLen(*v)
		}
	}
	if err := answersize.Charge(ctx, n); err != nil {
		return nil, err
	}
	return res, nil
}

// meterAnswers gives each HTTP request a meter for its answer and returns
// the answer's bytes to the budget once the handler has written it. A
// WebSocket's operations get one meter each (wsgql).
func meterAnswers(budget *answersize.Budget, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := budget.Meter()
		defer m.Close()
		next.ServeHTTP(w, r.WithContext(answersize.With(r.Context(), m)))
	})
}

// jsonPOST and jsonGET are gqlgen's POST and GET transports with one
// difference: the answer is encoded without HTML escaping. encoding/json
// writes <, > and & as \u003c, \u003e and \u0026 by default, six bytes for
// one that JSON does not require, which let a stored body of '<' grow
// sixfold on the way out.
type (
	jsonPOST struct{}
	jsonGET  struct{}
)

var (
	_ graphql.Transport = jsonPOST{}
	_ graphql.Transport = jsonGET{}
)

func (jsonPOST) Supports(r *http.Request) bool {
	if r.Header.Get("Upgrade") != "" {
		return false
	}
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && r.Method == http.MethodPost && mediaType == "application/json"
}

func (jsonPOST) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	ctx := r.Context()
	graphqlJSON := setContentType(w, r)
	start := graphql.Now()
	// limitBody already read the body through its limit.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeAnswer(w, exec.DispatchError(ctx, gqlerror.List{gqlerror.Errorf("could not read request body")}))
		return
	}
	// The variables and extensions are decoded generically, at about twenty
	// times their JSON: count the body's values first.
	if _, over := jsoncount.Values(body, MaxValues); over {
		tooManyValues(w)
		return
	}
	params := &graphql.RawParams{}
	if err := decodeJSON(bytes.NewReader(body), params); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		writeAnswer(w, exec.DispatchError(ctx, gqlerror.List{gqlerror.Errorf("json request body could not be decoded: %v", err)}))
		return
	}
	params.Headers = r.Header
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	runOperation(ctx, w, exec, params, graphqlJSON, false)
}

func (jsonGET) Supports(r *http.Request) bool {
	return r.Header.Get("Upgrade") == "" && r.Method == http.MethodGet
}

func (jsonGET) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		writeAnswer(w, &graphql.Response{Errors: gqlerror.List{{Message: "the query string could not be parsed"}}})
		return
	}
	graphqlJSON := setContentType(w, r)
	params := &graphql.RawParams{
		Query:         query.Get("query"),
		OperationName: query.Get("operationName"),
		Headers:       r.Header,
	}
	params.ReadTime.Start = graphql.Now()
	values := 0
	for _, name := range []string{"variables", "extensions"} {
		n, over := jsoncount.Values([]byte(query.Get(name)), MaxValues-values)
		if values += n; over {
			tooManyValues(w)
			return
		}
	}
	for name, into := range map[string]any{"variables": &params.Variables, "extensions": &params.Extensions} {
		if v := query.Get(name); v != "" {
			if err := decodeJSON(strings.NewReader(v), into); err != nil {
				w.WriteHeader(http.StatusBadRequest)
				writeAnswer(w, &graphql.Response{Errors: gqlerror.List{{Message: name + " could not be decoded"}}})
				return
			}
		}
	}
	params.ReadTime.End = graphql.Now()
	runOperation(r.Context(), w, exec, params, graphqlJSON, true)
}

// runOperation executes one operation and writes its answer, as gqlgen's HTTP
// transports do; onlyQueries refuses mutations (GET).
func runOperation(ctx context.Context, w http.ResponseWriter, exec graphql.GraphExecutor, params *graphql.RawParams, graphqlJSON, onlyQueries bool) {
	opCtx, errs := exec.CreateOperationContext(ctx, params)
	if errs != nil {
		status := http.StatusOK
		if errcode.GetErrorKind(errs) == errcode.KindProtocol {
			status = http.StatusUnprocessableEntity
			if graphqlJSON {
				status = http.StatusBadRequest
			}
		}
		w.WriteHeader(status)
		writeAnswer(w, exec.DispatchError(graphql.WithOperationContext(ctx, opCtx), errs))
		return
	}
	if onlyQueries {
		if op := opCtx.Doc.Operations.ForName(opCtx.OperationName); op == nil || op.Operation != ast.Query {
			w.WriteHeader(http.StatusNotAcceptable)
			writeAnswer(w, &graphql.Response{Errors: gqlerror.List{{Message: "GET requests only allow query operations"}}})
			return
		}
	}
	responses, ctx := exec.DispatchOperation(ctx, opCtx)
	writeAnswer(w, responses(ctx))
}

// setContentType answers application/graphql-response+json to a client
// that asks for it (and only it), application/json otherwise, as gqlgen
// does; it reports which.
func setContentType(w http.ResponseWriter, r *http.Request) bool {
	ct := "application/json"
	if accept := r.Header.Get("Accept"); accept != "" {
		ct = "application/graphql-response+json"
		for part := range strings.SplitSeq(accept, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil &&
				(mt == "application/json" || mt == "*/*" || mt == "application/*") {
				ct = "application/json"
				break
			}
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "application/graphql-response+json" {
				break
			}
		}
	}
	w.Header().Set("Content-Type", ct)
	return ct != "application/json"
}

// writeAnswer writes resp as JSON without HTML escaping, keys in the order
// gqlgen's Response declares them. Its data is JSON already (gqlgen marshals
// it once) and is written as it is: encoding/json would copy it into a
// buffer of its own (to compact it), a second copy of the whole answer
// held while a slow client reads it, and keep that buffer in its pool
// after the answer is done, counted in no budget.
func writeAnswer(w io.Writer, resp *graphql.Response) {
	head, err := marshalAnswerPart(answerErrors{Errors: resp.Errors})
	if err == nil {
		var tail []byte
		tail, err = marshalAnswerPart(answerRest{Label: resp.Label, Path: resp.Path, HasNext: resp.HasNext, Extensions: resp.Extensions})
		if err == nil {
			data := []byte(resp.Data)
			if data == nil {
				data = []byte("null")
			}
			writeAll(w, []byte("{"), head, []byte(`"data":`), data, tail, []byte("}\n"))
			return
		}
	}
	_, _ = io.WriteString(w, `{"errors":[{"message":"internal error: the answer could not be encoded"}]}`)
}

// answerErrors and answerRest are the members of a graphql.Response around
// its data, written by writeAnswer.
type (
	answerErrors struct {
		Errors gqlerror.List `json:"errors,omitempty"`
	}
	answerRest struct {
		Label      string         `json:"label,omitempty"`
		Path       ast.Path       `json:"path,omitempty"`
		HasNext    *bool          `json:"hasNext,omitempty"`
		Extensions map[string]any `json:"extensions,omitempty"`
	}
)

// marshalAnswerPart encodes v, an object, without HTML escaping, as members
// to write between an answer's braces: "" when it has none; else its
// members followed by a comma (answerErrors, before the data) or preceded
// by one (answerRest, after it).
func marshalAnswerPart(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode the answer's %T: %w", v, err)
	}
	members := bytes.TrimSpace(b.Bytes())
	members = members[1 : len(members)-1] // the object's braces
	if len(members) == 0 {
		return nil, nil
	}
	if _, errs := v.(answerErrors); errs {
		return append(members, ','), nil
	}
	return append([]byte{','}, members...), nil
}

// writeAll writes each part to w in turn, stopping at the first error (the
// client is gone; nothing more can be told it).
func writeAll(w io.Writer, parts ...[]byte) {
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		if _, err := w.Write(p); err != nil {
			return
		}
	}
}

// decodeJSON decodes with numbers kept as json.Number, as gqlgen does, so
// that Int variables stay integers.
func decodeJSON(r io.Reader, v any) error {
	d := json.NewDecoder(r)
	d.UseNumber()
	return d.Decode(v)
}
