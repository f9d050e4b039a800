package world

import "testing"

// TestFreePortNeverTwice: the kernel gives the port of a closed listener to a later listen on port 0
// (a component once got the same port for its metrics and its health probe, and never started).
// FreePort hands out each port once per process.
func TestFreePortNeverTwice(t *testing.T) {
	seen := map[int]int{}
	for i := range 2000 {
		port, err := FreePort()
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if first, ok := seen[port]; ok {
			t.Fatalf("call %d returned port %d, which call %d returned before", i, port, first)
		}
		seen[port] = i
	}
}
