//go:build unix && !linux

package fairq

import "testing"

func designs() []string { return []string{ticketsDesign} }

func lockedSlots(t *testing.T, path string) []uint64 {
	t.Fatal("no queue file on this system")
	return nil
}

func holdCounter(t *testing.T, design, path string) func() { return holdTicketCounter(t, path) }

func counterFree(t *testing.T, design, path string) bool { return ticketCounterFree(t, path) }
