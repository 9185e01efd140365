package kvstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/detourhq/detour/internal/topology"
	"github.com/nats-io/nats.go/jetstream"
)

// openCooldown writes the cooldown key with its TTL. A key still there
// (another worker's cooldown, or a stale one the server has not removed
// yet) that ends no sooner than c is left alone and returned as running, so
// a cooldown is never shortened; any other, or one the last reset ended, is
// replaced with a fresh TTL.
func (s *Store) openCooldown(ctx context.Context, provider string, c Cooldown, ttl time.Duration) (running *Cooldown, err error) {
	key := CooldownKey(provider)
	data, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("kvstate: encoding %s: %w", key, err)
	}
	var held Cooldown
	rev, kept, err := s.put(ctx, key, data, ttl, func(e jetstream.KeyValueEntry) bool {
		h, _ := s.Health(provider)
		var err error
		held, err = decode[Cooldown](e.Value())
		return err == nil && !held.Until.Before(c.Until) && !resetEnds(held, h)
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("kvstate: opening %s: %w", key, err)
	case kept != 0:
		s.keep(func(m *mirror) bool { return m.cooldowns.set(provider, held, kept) })
		return &held, nil
	}
	s.opened(provider, c, rev)
	return nil, nil
}

// put creates key with data and a TTL of ttl (recreating a deleted bucket:
// see create), or, when the key is there and stays (nil stays: none),
// replaces it at its revision, reading it again after a conflict. It
// returns the revision written, or that of the value that stayed.
func (s *Store) put(ctx context.Context, key string, data []byte, ttl time.Duration, stays func(jetstream.KeyValueEntry) bool) (rev, kept uint64, err error) {
	for attempt := range maxCASRetries {
		rev, err := s.create(ctx, key, data, jetstream.KeyTTL(ttl))
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return rev, 0, err
		}
		cur, err := s.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
			continue // expired meanwhile: create it afresh
		case err != nil:
			return 0, 0, err
		case stays != nil && stays(cur):
			return 0, cur.Revision(), nil
		}
		// One atomic step: KeyValue.Update would make the key permanent.
		rev, err = topology.Replace(ctx, s.js, "$KV."+Bucket+"."+key, data, cur.Revision(), ttl)
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return rev, 0, err
		}
		if err := casPause(ctx, attempt); err != nil {
			return 0, 0, err
		}
	}
	return 0, 0, fmt.Errorf("%d compare-and-set conflicts in a row", maxCASRetries)
}

// opened applies a cooldown this store wrote to its mirror at once and
// announces it.
func (s *Store) opened(provider string, c Cooldown, rev uint64) {
	s.keep(func(m *mirror) bool { return m.cooldowns.set(provider, c, rev) })
	if s.opts.OnCooldown != nil {
		s.opts.OnCooldown(provider, c)
	}
	if c.Operator {
		s.opts.Logger.Info("provider tripped by an operator", "provider", provider, "until", c.Until, "reason", c.Reason, "by", c.By)
		return
	}
	s.opts.Logger.Warn("provider cooling down", "provider", provider, "until", c.Until, "class", c.Class, "trip", c.Trip, "by", c.By)
}
