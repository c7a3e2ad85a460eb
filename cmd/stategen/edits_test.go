package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The edits users make to their state types in the first week each leave a
// generated file that no longer compiles against the declarations: a
// field removed from a value type, a state's value type changed, the state
// struct deleted. The generator must load the package regardless (the
// stale file is ignored), -check must say the files are stale (exit 3),
// and a run must rewrite them — or remove them once the package declares
// no state — after which the package builds and -check passes.
func TestGeneratorSurvivesEditsThatBreakTheGeneratedFile(t *testing.T) {
	const base = `package st

import "github.com/stategen/stategen/runtime"

// Visit is a value type.
type Visit struct {
	Page  string
	Score float64
	Tags  []string
}

//stategen:state
type State struct {
	Clicks runtime.Value[string, int64] ` + "`state:\"clicks\"`" + `
	Visits runtime.List[string, Visit]  ` + "`state:\"visits\"`" + `
}
`
	for _, tc := range []struct {
		name, edit string
		removed    bool // the edit leaves no state: the generated files go
	}{
		{"field removed", strings.Replace(base, "\tScore float64\n", "", 1), false},
		{"state type changed", strings.Replace(base, "runtime.Value[string, int64]", "runtime.Value[string, int32]", 1), false},
		{"value type renamed", strings.ReplaceAll(base, "Visit", "PageVisit"), false},
		{"state struct deleted", base[:strings.Index(base, "//stategen:state")] + "var _ runtime.Kind\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tempModule(t, map[string]string{"st/st.go": base})
			stategen := func(want int, args ...string) string {
				t.Helper()
				var out, errb bytes.Buffer
				if code := run(args, &out, &errb); code != want {
					t.Fatalf("stategen %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out.String(), errb.String())
				}
				return out.String() + errb.String()
			}
			stategen(exitOK, "./...")
			gen := filepath.Join(dir, "st", "stategen_state.gen.go")
			if _, err := os.Stat(gen); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "st", "st.go"), []byte(tc.edit), 0o644); err != nil {
				t.Fatal(err)
			}
			if out := stategen(exitStale, "-check", "./..."); !strings.Contains(out, "stategen_state.gen.go: ") {
				t.Errorf("-check does not name the stale file:\n%s", out)
			}
			stategen(exitOK, "./...")
			_, err := os.Stat(gen)
			if tc.removed != os.IsNotExist(err) {
				t.Errorf("after the run: %s exists: %v (want removed: %v)", gen, err, tc.removed)
			}
			stategen(exitOK, "-check", "./...")
			vet := exec.Command("go", "vet", "./...")
			vet.Dir = dir
			if out, err := vet.CombinedOutput(); err != nil {
				t.Errorf("go vet after the run: %v\n%s", err, out)
			}
		})
	}
}

// tempModule writes a module that requires this repository (replaced by
// the checkout, offline) with files, makes it the working directory for
// the test and returns it.
func tempModule(t *testing.T, files map[string]string) string {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	files["go.mod"] = "module example.com/edits\n\ngo 1.26\n\nrequire github.com/stategen/stategen v0.0.0\n\nreplace github.com/stategen/stategen => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	files["go.sum"] = string(sum)
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOWORK", "off")
	t.Setenv("GOTOOLCHAIN", "local")
	t.Chdir(dir)
	return dir
}
