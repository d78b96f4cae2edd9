// Package js holds the TypeScript client of baton (@batonhq/client, in this
// directory's src/) and the Go test that builds it and runs its tests
// against a real nats-server and a real worker (js_test.go).
package js
