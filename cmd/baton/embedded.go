package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// startEmbedded runs an in-process nats-server with JetStream storing under
// stateDir/nats, listening on 127.0.0.1:port (-1 picks a free port).
func startEmbedded(stateDir string, port int) (*server.Server, error) {
	s, err := server.NewServer(&server.Options{
		ServerName: "baton-embedded",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(stateDir, "nats"),
		NoSigs:     true,
		NoLog:      true,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded NATS did not start on 127.0.0.1:%d", port)
	}
	return s, nil
}
