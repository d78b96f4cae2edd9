package tenancy

import "time"

// ShortenGraces makes s sweep unbound slots older than unbound every sweep.
func (s *Slots) ShortenGraces(unbound, sweep time.Duration) { s.unbound, s.sweep = unbound, sweep }
