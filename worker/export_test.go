package worker

// RaceEnabled lets the external tests size their work: under the race
// detector, gzip and tar run several times slower.
const RaceEnabled = raceEnabled
