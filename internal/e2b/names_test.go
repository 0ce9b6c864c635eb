package e2b

import (
	"strings"
	"testing"
)

func TestParseName(t *testing.T) {
	valid := []struct {
		in   string
		want Name
		str  string
	}{
		{"my-tpl", Name{Alias: "my-tpl"}, "my-tpl"},
		{"  My_Tpl  ", Name{Alias: "my_tpl"}, "my_tpl"},
		{"my-tpl:v1.2", Name{Alias: "my-tpl", Tag: "v1.2"}, "my-tpl:v1.2"},
		{"my-tpl:DEFAULT", Name{Alias: "my-tpl"}, "my-tpl"},
		{"team-slug/my-tpl", Name{Namespace: "team-slug", Alias: "my-tpl"}, "team-slug/my-tpl"},
		{"Team/Tpl:Prod", Name{Namespace: "team", Alias: "tpl", Tag: "prod"}, "team/tpl:prod"},
		// A build UUID may stand in the tag position (it pins a build).
		{"tpl:0b9d3f2e-6c1a-4a8e-9f7d-2e5b8c1d4a6f", Name{Alias: "tpl", Tag: "0b9d3f2e-6c1a-4a8e-9f7d-2e5b8c1d4a6f"}, "tpl:0b9d3f2e-6c1a-4a8e-9f7d-2e5b8c1d4a6f"},
		{strings.Repeat("a", maxNameLength), Name{Alias: strings.Repeat("a", maxNameLength)}, strings.Repeat("a", maxNameLength)},
	}
	for _, tc := range valid {
		got, err := ParseName(tc.in)
		if err != nil {
			t.Errorf("ParseName(%q): unexpected error %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseName(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		if got.String() != tc.str {
			t.Errorf("ParseName(%q).String() = %q, want %q", tc.in, got.String(), tc.str)
		}
	}

	invalid := []struct {
		in, mention string
	}{
		{"", `""`},
		{"   ", `"   "`},
		{"my tpl", `"my tpl"`},
		{"tpl:", `invalid tag ""`},
		{"tpl:v1:v2", `invalid tag "v1:v2"`},
		{"tpl:a/b", `invalid tag "a/b"`},
		{":v1", `invalid alias ""`},
		{"/tpl", `invalid namespace ""`},
		{"ns/", `invalid alias ""`},
		{"ns/a/b", `invalid alias "a/b"`},
		{"tpl.name", `invalid alias "tpl.name"`},
		{"ns.x/tpl", `invalid namespace "ns.x"`},
		{strings.Repeat("a", maxNameLength+1), "at most 128"},
	}
	for _, tc := range invalid {
		_, err := ParseName(tc.in)
		if err == nil {
			t.Errorf("ParseName(%q): expected an error", tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("ParseName(%q) error %q does not mention %s", tc.in, err, tc.mention)
		}
	}
}

func TestNormalizeTag(t *testing.T) {
	for in, want := range map[string]string{"v1": "v1", " Prod ": "prod", "1.2.3-rc_1": "1.2.3-rc_1", "default": "default"} {
		got, err := NormalizeTag(in)
		if err != nil || got != want {
			t.Errorf("NormalizeTag(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a b", "a:b", "a/b", "0b9d3f2e-6c1a-4a8e-9f7d-2e5b8c1d4a6f", "0B9D3F2E6C1A4A8E9F7D2E5B8C1D4A6F", strings.Repeat("t", maxNameLength+1)} {
		err := ValidateTag(in)
		if err == nil {
			t.Errorf("ValidateTag(%q): expected an error", in)
		} else if !strings.Contains(err.Error(), "\""+in+"\"") {
			t.Errorf("ValidateTag(%q) error %q does not name the tag", in, err)
		}
	}
}

func TestIDShapes(t *testing.T) {
	cases := []struct {
		what string
		fn   func(string) error
		ok   []string
		bad  []string
	}{
		{"build", ValidateBuildID,
			[]string{"0b9d3f2e-6c1a-4a8e-9f7d-2e5b8c1d4a6f"},
			[]string{"", "0b9d3f2e6c1a4a8e9f7d2e5b8c1d4a6f", "{0b9d3f2e-6c1a-4a8e-9f7d-2e5b8c1d4a6f}", "v1"}},
		{"template", ValidateTemplateID,
			[]string{"rki5dems9wqfm4r03t7g"},
			[]string{"", "rki5dems9wqfm4r03t7", "RKI5DEMS9WQFM4R03T7G", "rki5dems9wqfm4r03t7g1", "my-tpl"}},
		{"sandbox", ValidateSandboxID,
			[]string{"iabcdefghij0123456789", "x1"},
			[]string{"", "i-abc", "I123", "../x"}},
		{"files hash", ValidateFilesHash,
			[]string{strings.Repeat("0a", 32)},
			[]string{"", strings.Repeat("0A", 32), strings.Repeat("a", 63), strings.Repeat("g", 64)}},
	}
	for _, tc := range cases {
		for _, s := range tc.ok {
			if err := tc.fn(s); err != nil {
				t.Errorf("%s %q: unexpected error %v", tc.what, s, err)
			}
		}
		for _, s := range tc.bad {
			err := tc.fn(s)
			if err == nil {
				t.Errorf("%s %q: expected an error", tc.what, s)
			} else if !strings.Contains(err.Error(), "\""+s+"\"") {
				t.Errorf("%s %q: error %q does not name the input", tc.what, s, err)
			}
		}
	}
	// What a template ID looks like, and where a name does instead.
	if err := ValidateTemplateID("abc"); err == nil || !strings.Contains(err.Error(), "20 characters of a-z and 0-9") ||
		!strings.Contains(err.Error(), "such as \"rki5dems9wqfm4r03t7g\"") || !strings.Contains(err.Error(), "A name such as") {
		t.Errorf("template ID error %v: want the shape, an example and where names are accepted", err)
	}
	if IsBuildID("v1") || !IsBuildID("0b9d3f2e-6c1a-4a8e-9f7d-2e5b8c1d4a6f") {
		t.Error("IsBuildID misclassifies")
	}
	if IsTemplateID("my-tpl") || !IsTemplateID("rki5dems9wqfm4r03t7g") {
		t.Error("IsTemplateID misclassifies")
	}
}
