// Package repo locates the repository for tests and test helpers: the module root, where
// .tools/bin and deploy/ live.
package repo

import (
	"errors"
	"os"
	"path/filepath"
)

// Root is the nearest folder holding go.mod, from the working directory up.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
