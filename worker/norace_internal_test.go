//go:build !race

package worker

// raceEnabled: see race_internal_test.go.
const raceEnabled = false
