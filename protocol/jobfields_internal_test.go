package protocol

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestJobFieldsAreTheJobs: the decoder's table holds exactly the fields of
// Job's encoding, under the same names in JSON and msgpack, once each.
func TestJobFieldsAreTheJobs(t *testing.T) {
	var encoded []string
	jt := reflect.TypeFor[Job]()
	for i := range jt.NumField() {
		f := jt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		mp, _, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
		if name == "" || name == "-" {
			t.Errorf("Job.%s has no JSON name", f.Name)
			continue
		}
		if mp != name {
			t.Errorf("Job.%s is %q in JSON and %q in msgpack", f.Name, name, mp)
		}
		encoded = append(encoded, name)
	}
	var table []string
	for _, f := range jobFields {
		table = append(table, f.name)
	}
	slices.Sort(encoded)
	slices.Sort(table)
	if !slices.Equal(encoded, table) || len(slices.Compact(slices.Clone(table))) != len(table) {
		t.Fatalf("the decoder reads %v, a Job encodes %v", table, encoded)
	}
}
