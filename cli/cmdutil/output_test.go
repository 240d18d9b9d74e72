package cmdutil

import (
	"bytes"
	"fmt"
	"testing"
)

// TestWriteList: -o json prints the list as it came (an empty list as
// []), text prints aligned columns under the header.
func TestWriteList(t *testing.T) {
	type row struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	line := func(r row) string { return fmt.Sprintf("%s\t%s", r.ID, r.Name) }
	tests := []struct {
		name   string
		format string
		list   []row
		want   string
	}{
		{"text", "text", []row{{"1", "a"}, {"22", "bb"}}, "ID  NAME\n1   a\n22  bb\n"},
		{"text empty", "text", []row{}, "ID  NAME\n"},
		{"json", "json", []row{{"1", "a"}}, "[\n  {\n    \"id\": \"1\",\n    \"name\": \"a\"\n  }\n]\n"},
		{"json empty", "json", []row{}, "[]\n"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if err := WriteList(&b, Output{Format: tt.format}, tt.list, "ID\tNAME", line); err != nil {
			t.Fatal(err)
		}
		if b.String() != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, b.String(), tt.want)
		}
	}
}
