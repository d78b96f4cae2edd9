// Package browser holds the end-to-end suites driven in headless Chromium:
// the console against real workers (runs, approvals, tools) and the React
// chat example.
package browser
