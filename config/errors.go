package config

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid marks an error caused by bad configuration: a DETOUR_* setting
// that was refused, or a chain file that was refused or could not be read.
// errors.Is finds it in the errors of [LoadSettings], [Load] and [Parse].
var ErrInvalid = errors.New("invalid configuration")

// ExitConfig is the exit code of a command stopped by bad configuration: a
// DETOUR_* setting or a chain file. It is EX_CONFIG of sysexits.h.
const ExitConfig = 78

// Problem is one thing wrong with a chain file.
type Problem struct {
	// Line is where in the file the problem is, from 1; 0 for something the
	// file leaves out (no providers at all, say).
	Line int
	// Text says what is wrong and where in the file's structure, for
	// example `providers[1] "backup": timeout: must be positive`.
	Text string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("line %d: %s", p.Line, p.Text)
	}
	return p.Text
}

// FileError is a refused chain file: every problem found in it, in the
// order of the file (those without a line last), then hints such as the
// keys a mapping accepts.
type FileError struct {
	Path     string // the file; empty when Parse was given its bytes
	Problems []Problem
	Hints    []string
}

// Lines are the problems, one a line, then the hints.
func (e *FileError) Lines() []string {
	lines := make([]string, 0, len(e.Problems)+len(e.Hints))
	for _, p := range e.Problems {
		lines = append(lines, p.String())
	}
	return append(lines, e.Hints...)
}

// Error is one line per problem. With a Path, a first line names the file
// and counts the problems, and the others are indented under it.
func (e *FileError) Error() string {
	if e.Path == "" {
		return strings.Join(e.Lines(), "\n")
	}
	return fmt.Sprintf("chain file %s has %s:\n  %s", e.Path, plural(len(e.Problems), "problem"), strings.Join(e.Lines(), "\n  "))
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *FileError) Is(target error) bool { return target == ErrInvalid }

// SettingsError lists every DETOUR_* variable that was refused, each
// problem starting with the variable's name.
type SettingsError struct {
	Problems []string
}

// Lines are the problems, one a line.
func (e *SettingsError) Lines() []string { return e.Problems }

// Error is a first line counting the problems, then one indented line each.
func (e *SettingsError) Error() string {
	return fmt.Sprintf("%s refused:\n  %s", plural(len(e.Problems), "setting"), strings.Join(e.Problems, "\n  "))
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *SettingsError) Is(target error) bool { return target == ErrInvalid }

// readError is a chain file that could not be read: bad configuration too.
type readError struct{ err error }

func (e *readError) Error() string        { return e.err.Error() }
func (e *readError) Unwrap() error        { return e.err }
func (e *readError) Is(target error) bool { return target == ErrInvalid }

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
