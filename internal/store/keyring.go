package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
)

// Keyring is a store that keeps secret keys of xdsd's own beside its
// resources: one value per name, made once and then the same for every
// replica sharing the store and across restarts. Keys are not resources:
// they make no revision, wake no watcher, and are in no history.
// (The redaction digests' HMAC key is one: internal/redact.)
type Keyring interface {
	// Key returns the key stored under name. When there is none yet it
	// stores fresh and returns it; of replicas racing to make it, the
	// first to store wins, and every one of them gets its key.
	Key(ctx context.Context, name string, fresh []byte) ([]byte, error)
}

// RedactKeyName is the name of the redaction digests' HMAC key.
const RedactKeyName = "redact-hmac"

// KeyFor returns s's key name, made of 32 random bytes if s has none yet.
// A store that keeps no keys is an error saying so.
func KeyFor(ctx context.Context, s Store, name string) ([]byte, error) {
	kr, ok := s.(Keyring)
	if !ok {
		return nil, fmt.Errorf("store %T keeps no keys", s)
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	k, err := kr.Key(ctx, name, fresh)
	if err == nil && len(k) == 0 {
		err = errors.New("an empty key")
	}
	if err != nil {
		return nil, fmt.Errorf("store key %q: %w", name, err)
	}
	return k, nil
}
