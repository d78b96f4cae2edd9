// Package config owns the worker's configuration file: NATS and storage
// settings, and the profiles that turn a job into an agent invocation. It
// decodes YAML (and so JSON) strictly, and resolves a job against its
// profile into the exact argv, environment, input and deadline of a run.
package config
