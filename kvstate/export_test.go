package kvstate

// CooldownForTest returns the mirrored cooldown of provider, if its key is
// in the mirror.
func (s *Store) CooldownForTest(provider string) (Cooldown, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.m.cooldowns[provider]
	return c.value, ok
}
