package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's quick start, run as a new user runs it: the steps and the
// lines of code come from README.md itself, so that the README cannot
// drift from what works.

// readmeSteps are the pieces of README.md a new module uses.
type readmeSteps struct {
	getTool   []string // the arguments of README's "go get -tool ..." line
	generate  string   // README's //go:generate line
	inspectGo string   // README's checkpoint/inspect example, verbatim
}

// readReadme extracts readmeSteps from README.md, failing if one is
// missing.
func readReadme(t *testing.T) readmeSteps {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	var st readmeSteps
	if m := regexp.MustCompile("(?m)^go (get -tool \\S+/cmd/stategen)$").FindStringSubmatch(readme); m != nil {
		st.getTool = strings.Fields(m[1])
	} else {
		t.Fatal("README.md has no line \"go get -tool .../cmd/stategen\"")
	}
	if m := regexp.MustCompile("(?m)^//go:generate .*stategen.*$").FindString(readme); m != "" {
		st.generate = m
	} else {
		t.Fatal("README.md has no //go:generate line")
	}
	if m := regexp.MustCompile("(?s)```go\n(c, err := inspect\\.Open\\(.*?)```").FindStringSubmatch(readme); m != nil {
		st.inspectGo = m[1]
	} else {
		t.Fatal("README.md has no checkpoint/inspect example starting with \"c, err := inspect.Open(\"")
	}
	return st
}

// userModule is a fresh module outside the repository that requires
// stategen through a replace of the checkout, as a user trying a local
// change would.
type userModule struct {
	t   *testing.T
	dir string
	env []string
}

// newUserModule runs, in a new directory, go mod init, the require and
// replace of the checkout, and README's go get -tool line. Nothing is
// fetched: the module cache already holds stategen's dependencies (the
// repository's own tests built them), and GOPROXY=off keeps it that way.
func newUserModule(t *testing.T, st readmeSteps) *userModule {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a module with the go command: not in -short")
	}
	m := &userModule{t: t, dir: t.TempDir()}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFLAGS=") {
			m.env = append(m.env, kv)
		}
	}
	m.env = append(m.env, "GOFLAGS=", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local")
	m.mustGo("mod", "init", "example.com/quick")
	m.mustGo("mod", "edit", "-require=github.com/stategen/stategen@v0.0.0", "-replace=github.com/stategen/stategen="+repoRoot(t))
	m.mustGo(st.getTool...)
	return m
}

// write writes a file of the module.
func (m *userModule) write(name, content string) {
	m.t.Helper()
	p := filepath.Join(m.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		m.t.Fatal(err)
	}
}

// goCmd runs the go command in the module.
func (m *userModule) goCmd(args ...string) (string, error) {
	m.t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = m.dir
	cmd.Env = m.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustGo runs the go command and fails the test if it fails.
func (m *userModule) mustGo(args ...string) string {
	m.t.Helper()
	out, err := m.goCmd(args...)
	if err != nil {
		m.t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestREADMEQuickStart runs the README's steps in a fresh module whose
// value types live in another package than the state declaration: go get
// -tool, the go:generate line, go mod tidy (which must keep the generator's
// dependencies), go generate, go vet, and a program that writes a
// checkpoint and reads it back with the README's checkpoint/inspect
// example, verbatim, through the generated descriptors.
func TestREADMEQuickStart(t *testing.T) {
	st := readReadme(t)
	m := newUserModule(t, st)
	m.write("model/model.go", `// Package model holds the value types, apart from the state declaration.
package model

import "time"

// UserStats is what the job keeps per user.
type UserStats struct {
	Events int64
	Pages  []string
	Last   time.Time
}
`)
	m.write("pipeline/state.go", `// Package pipeline declares the job's state.
package pipeline

import (
	"example.com/quick/model"
	"github.com/stategen/stategen/runtime"
)

`+st.generate+`

// ClickState is the job's state.
//
//stategen:state
type ClickState struct {
	Users runtime.Value[string, model.UserStats] `+"`state:\"user-stats\"`"+`
}
`)
	m.write("main.go", `package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"example.com/quick/model"
	"example.com/quick/pipeline"
	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/inspect"
)

func main() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "quick")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := cow.New(cow.Options{})
	if err != nil {
		log.Fatal(err)
	}
	st, err := pipeline.OpenClickState(store)
	if err != nil {
		log.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	if err := st.Users.Put("ann", model.UserStats{Events: 2, Pages: []string{"/a", "/b"}, Last: at}); err != nil {
		log.Fatal(err)
	}
	snap, err := store.Snapshot()
	if err != nil {
		log.Fatal(err)
	}
	defer snap.Release()
	s, err := checkpoint.NewDir(dir)
	if err != nil {
		log.Fatal(err)
	}
	in, err := checkpoint.WriteInstance(ctx, s, checkpoint.CheckpointName(42), "op-0.sgc", snap, nil)
	if err != nil {
		log.Fatal(err)
	}
	op, err := checkpoint.NewOperator("clickstream", in)
	if err != nil {
		log.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, s, checkpoint.CheckpointName(42), &checkpoint.Metadata{Operators: []checkpoint.Operator{op}}); err != nil {
		log.Fatal(err)
	}

	// The README's example, verbatim:
`+st.inspectGo+`	if err != nil {
		log.Fatal(err)
	}
	u := users["ann"]
	fmt.Println(len(users), u.Events, u.Pages, u.Last.Equal(at))
}
`)
	m.mustGo("mod", "tidy")
	m.mustGo("generate", "./...")
	for _, name := range []string{"pipeline/stategen_state.gen.go", "pipeline/stategen_state.gen_test.go"} {
		if _, err := os.Stat(filepath.Join(m.dir, name)); err != nil {
			t.Fatalf("go generate did not write %s: %v", name, err)
		}
	}
	m.mustGo("vet", "./...")
	if out, want := m.mustGo("run", "."), "1 2 [/a /b] true\n"; out != want {
		t.Errorf("the program printed %q, want %q", out, want)
	}
	m.mustGo("test", "./pipeline")
	// The tool survives a second tidy and still checks the package.
	m.mustGo("mod", "tidy")
	if out := m.mustGo("tool", "stategen", "-check", "-v", "./..."); !strings.Contains(out, "pipeline/stategen_state.gen.go: up to date") {
		t.Errorf("go tool stategen -check -v:\n%s", out)
	}
}
