package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// A report is kept up to date by fill: every block
//
//	<!-- benchreport compare-backends -units sec/op results/backends.txt -->
//	...
//	<!-- end benchreport -->
//
// has its content replaced by what the command in the opening comment
// prints (compare-backends or chart; a chart with -o writes its file and
// prints nothing). The words of the command are split as a shell would
// split them, with '…' and "…" quoting, and file names are relative to the
// report's directory. The prose around the blocks is left alone, so a
// report's text and its tables live in one file and the tables are
// regenerated from the recorded results with one command.

const (
	fillOpen  = "<!-- benchreport "
	fillClose = "<!-- end benchreport -->"
)

// fillCmd implements "benchreport fill FILE".
func fillCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchreport fill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	check := fs.Bool("check", false, "report whether FILE is up to date instead of rewriting it (exit status 1 if not)")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "benchreport fill: want exactly one markdown file")
		return errUsage
	}
	path := fs.Arg(0)
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("benchreport fill: %w", err)
	}
	filled, err := fill(old, filepath.Dir(path), stderr)
	if err != nil {
		return fmt.Errorf("benchreport fill: %s: %w", path, err)
	}
	if *check {
		if !bytes.Equal(old, filled) {
			fmt.Fprintf(stdout, "%s: tables differ from the results they name; run benchreport fill %s\n", path, path)
			return errRegression
		}
		return nil
	}
	if bytes.Equal(old, filled) {
		return nil
	}
	return os.WriteFile(path, filled, 0o644)
}

// fill returns doc with every benchreport block regenerated, running the
// blocks' commands in dir.
func fill(doc []byte, dir string, stderr io.Writer) ([]byte, error) {
	var out bytes.Buffer
	lines := strings.SplitAfter(string(doc), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		out.WriteString(line)
		trimmed := strings.TrimSpace(line)
		if !strings.HasPrefix(trimmed, fillOpen) {
			if trimmed == fillClose {
				return nil, fmt.Errorf("line %d: %q without a block to close", i+1, fillClose)
			}
			continue
		}
		if !strings.HasSuffix(trimmed, "-->") {
			return nil, fmt.Errorf("line %d: a benchreport comment must end on its line with -->", i+1)
		}
		cmdline := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(trimmed, fillOpen), "-->"))
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != fillClose {
			if strings.HasPrefix(strings.TrimSpace(lines[end]), fillOpen) {
				return nil, fmt.Errorf("line %d: block opened on line %d is not closed with %q", end+1, i+1, fillClose)
			}
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("line %d: block is not closed with %q", i+1, fillClose)
		}
		content, err := runBlock(cmdline, dir, stderr)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", i+1, cmdline, err)
		}
		out.WriteString(content)
		out.WriteString(lines[end])
		i = end
	}
	return out.Bytes(), nil
}

// runBlock runs the command of one block in dir and returns what it
// printed, ending with a newline (or nothing).
func runBlock(cmdline, dir string, stderr io.Writer) (string, error) {
	args, err := splitWords(cmdline)
	if err != nil {
		return "", err
	}
	if len(args) == 0 || (args[0] != "compare-backends" && args[0] != "chart") {
		return "", errors.New("a block runs compare-backends or chart")
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if err := os.Chdir(dir); err != nil {
		return "", err
	}
	defer os.Chdir(wd)
	var buf, errb bytes.Buffer
	if code := run(args, &buf, &errb); code != 0 {
		stderr.Write(errb.Bytes())
		return "", fmt.Errorf("exit status %d: %s", code, strings.TrimSpace(errb.String()))
	}
	s := buf.String()
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s, nil
}

// splitWords splits s into words at unquoted spaces; '…' quotes everything
// literally, "…" everything but \" and \\.
func splitWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated '")
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				w.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, errors.New(`unterminated "`)
			}
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}
