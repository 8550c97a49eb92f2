package noop

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/llmplanner/planner/connectors"
)

// Open returns a no-op connector whose recorded decisions are also appended to a journal
// file (one JSON object a line, fsynced), and reloaded from it when it exists: the newest
// applied decision id survives a restart, so a decision retried after a crash is recognised
// and not recorded twice.
func Open(path string, inv connectors.Inventory) (*Journaled, error) {
	c := New(inv)
	f, err := os.Open(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("noop journal: %w", err)
	default:
		sc := bufio.NewScanner(f)
		for line := 1; sc.Scan(); line++ {
			var a Applied
			if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
				f.Close()
				return nil, fmt.Errorf("noop journal %s:%d: %w", path, line, err)
			}
			c.applied = append(c.applied, a)
		}
		err := sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("noop journal %s: %w", path, err)
		}
	}
	return &Journaled{Connector: c, path: path}, nil
}

// Journaled is a no-op connector with a journal file.
type Journaled struct {
	*Connector
	path string
}

// Apply records the decision in the journal (fsynced) and then in memory, so a decision is
// never taken as applied unless it is on disk: an apply retried after a failed write writes
// it then.
func (j *Journaled) Apply(_ context.Context, id int64, t connectors.Targets) error {
	return j.apply(id, t, func() error {
		line, err := json.Marshal(Applied{DecisionID: id, Targets: t})
		if err != nil {
			return err
		}
		f, err := os.OpenFile(j.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("noop journal: %w", err)
		}
		if _, err := f.Write(append(line, '\n')); err != nil {
			f.Close()
			return fmt.Errorf("noop journal: %w", err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("noop journal: %w", err)
		}
		return f.Close()
	})
}
