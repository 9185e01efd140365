package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/detourhq/detour/config"
)

// exitCode is the exit code of a command that failed with err:
// config.ExitConfig when a setting or the chain file is at fault, else 1.
func exitCode(err error) int {
	if errors.Is(err, config.ErrInvalid) {
		return config.ExitConfig
	}
	return 1
}

// reportConfig reports a configuration error that stopped the processor and
// returns config.ExitConfig: one problem a line, or with
// DETOUR_LOG_FORMAT=json one log record listing them, so the log stays JSON.
func reportConfig(stderr io.Writer, logger *slog.Logger, s config.Settings, err error) int {
	if s.LogFormat != config.LogFormatJSON {
		fmt.Fprintf(stderr, "processor: %v\n", err)
		return config.ExitConfig
	}
	var fe *config.FileError
	if errors.As(err, &fe) {
		logger.Error("chain file refused", "path", fe.Path, "problems", fe.Lines())
	} else {
		logger.Error("chain file refused", "err", err)
	}
	return config.ExitConfig
}
