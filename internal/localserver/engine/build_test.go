package engine

import "testing"

func TestDescribeStep(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		args []string
		want string
	}{
		{"RUN", []string{"make all"}, "RUN make all"},
		{"RUN", []string{"apt-get update", "root"}, "RUN apt-get update (as root)"},
		{"COPY", []string{"app", "/srv/", "", ""}, "COPY app /srv/"},
		{"COPY", []string{"a.sh", "bin/", "u:g", "0755"}, "COPY a.sh bin/ (owner u:g, mode 0755)"},
		{"ENV", []string{"A", "1", "B", "$A"}, "ENV A=1 B=$A"},
		{"WORKDIR", []string{"/app"}, "WORKDIR /app"},
	} {
		if got := describeStep(tc.typ, tc.args); got != tc.want {
			t.Errorf("describeStep(%s, %q) = %q, want %q", tc.typ, tc.args, got, tc.want)
		}
	}
}
