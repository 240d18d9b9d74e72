package desktop

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestFrontendTypesMatchGo: the types the window's script is checked
// against (console/typecheck/desktop.d.ts) name the JSON fields of the Go
// values the bindings return and the UI's methods, no more and no fewer,
// so a field renamed on one side fails here rather than reading undefined.
func TestFrontendTypesMatchGo(t *testing.T) {
	src, err := os.ReadFile("../console/typecheck/desktop.d.ts")
	if err != nil {
		t.Fatal(err)
	}
	ifaces := interfaces(string(src))
	for _, v := range []any{Status{}, Account{}, ConnState{}, Row{}, Role{}, Notice{}, Endpoint{}} {
		typ := reflect.TypeOf(v)
		t.Run(typ.Name(), func(t *testing.T) {
			got, ok := ifaces[typ.Name()]
			if !ok {
				t.Fatalf("desktop.d.ts has no interface %s", typ.Name())
			}
			var want []string
			for f := range typ.Fields() {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if name != "" && name != "-" {
					want = append(want, name)
				}
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("interface %s has fields %v; the Go type's JSON fields are %v", typ.Name(), got, want)
			}
		})
	}
	var methods []string
	uiType := reflect.TypeOf(&UI{})
	for m := range uiType.Methods() {
		methods = append(methods, m.Name)
	}
	slices.Sort(methods)
	if got := ifaces["UI"]; !slices.Equal(got, methods) {
		t.Errorf("interface UI has methods %v; the Go UI has %v", got, methods)
	}
}

// member is one field or method line of an interface in the .d.ts file.
var member = regexp.MustCompile(`^    (\w+)\??[:(]`)

// interfaces returns the member names of each interface in a .d.ts file,
// sorted; it reads the file's own layout (two-space indents).
func interfaces(src string) map[string][]string {
	out := map[string][]string{}
	name := ""
	for _, line := range strings.Split(src, "\n") {
		if n, ok := strings.CutPrefix(line, "  interface "); ok {
			name = strings.TrimSuffix(n, " {")
			out[name] = []string{}
			continue
		}
		if line == "  }" {
			name = ""
			continue
		}
		if m := member.FindStringSubmatch(line); m != nil && name != "" && !slices.Contains(out[name], m[1]) {
			out[name] = append(out[name], m[1])
		}
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}
