package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestLoadWithoutKeys: a chain file whose api_key_env variable is unset is
// refused by Load, as a processor needs the key, but read by
// LoadWithoutKeys, with no key; its other problems are still refused.
func TestLoadWithoutKeys(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	body := "providers:\n  - {name: p, type: openai, model: m, api_key_env: DETOUR_TEST_UNSET_KEY}\nchains:\n  default: [p]\n"
	if err := os.WriteFile(good, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(body+"colour: red\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("DETOUR_TEST_UNSET_KEY")
	if _, err := Load(good); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Load with the key unset: %v, want refused", err)
	}
	f, err := LoadWithoutKeys(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Providers) != 1 || f.Providers[0].Name != "p" || f.Providers[0].APIKey != "" {
		t.Errorf("providers %#v, want p without a key", f.Providers)
	}
	if _, err := LoadWithoutKeys(bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("LoadWithoutKeys of a file with an unknown key: %v, want refused", err)
	}
}
