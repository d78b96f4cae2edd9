package sandbox

import (
	"context"

	"github.com/batonhq/baton/sandbox/internal/stage"
)

// Stages are the runner chain's stages by subcommand name, each run as
// `<binary> <name> --spec PATH`: by the baton binary, and by the smaller
// baton-runner binary that starts faster (cmd/baton-runner). Package
// internal/stage is the runner they make up.
var Stages = stage.Stages

// RunStage runs the stage named name, as its subcommand does.
func RunStage(ctx context.Context, name, specPath string) error {
	return stage.Run(ctx, name, specPath)
}
