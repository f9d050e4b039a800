package bootstrap

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// NewLogger builds the component's zap logger from the options: JSON in production, console in
// development (or as --log-format says), at --log-level, named after the component.
func NewLogger(o *Options) (logr.Logger, error) {
	level, err := parseLevel(o.LogLevel)
	if err != nil {
		return logr.Discard(), fmt.Errorf("--log-level: %w", err)
	}
	format := o.LogFormat
	if format == "" {
		format = LogFormatJSON
		if o.Development {
			format = LogFormatConsole
		}
	}
	zo := crzap.Options{
		Development: o.Development,
		DestWriter:  o.LogWriter,
		Level:       level,
		TimeEncoder: zapcore.RFC3339NanoTimeEncoder,
	}
	if zo.DestWriter == nil {
		zo.DestWriter = os.Stderr
	}
	switch format {
	case LogFormatJSON:
		zo.NewEncoder = func(opts ...crzap.EncoderConfigOption) zapcore.Encoder {
			return zapcore.NewJSONEncoder(encoderConfig(o.Development, opts))
		}
	case LogFormatConsole:
		zo.NewEncoder = func(opts ...crzap.EncoderConfigOption) zapcore.Encoder {
			return zapcore.NewConsoleEncoder(encoderConfig(o.Development, opts))
		}
	default:
		return logr.Discard(), fmt.Errorf("--log-format: %q is not one of json, console", o.LogFormat)
	}
	return crzap.New(crzap.UseFlagOptions(&zo)).WithName(o.Component), nil
}

func encoderConfig(development bool, opts []crzap.EncoderConfigOption) zapcore.EncoderConfig {
	cfg := zapcore.EncoderConfig{
		TimeKey:        "ts",
		LevelKey:       "level",
		NameKey:        "logger",
		CallerKey:      "caller",
		MessageKey:     "msg",
		StacktraceKey:  "stacktrace",
		LineEnding:     zapcore.DefaultLineEnding,
		EncodeLevel:    zapcore.LowercaseLevelEncoder,
		EncodeTime:     zapcore.RFC3339NanoTimeEncoder,
		EncodeDuration: zapcore.StringDurationEncoder,
		EncodeCaller:   zapcore.ShortCallerEncoder,
	}
	if development {
		cfg.EncodeLevel = zapcore.CapitalLevelEncoder
	}
	for _, opt := range opts {
		opt(&cfg)
	}
	return cfg
}

// parseLevel accepts debug, info, warn, error (any case) or a non-negative number N, meaning logr
// verbosity V(N) (zap level -N).
func parseLevel(s string) (zapcore.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "info":
		return zapcore.InfoLevel, nil
	case "debug":
		return zapcore.DebugLevel, nil
	case "warn", "warning":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > 127 {
		return 0, fmt.Errorf("%q is not one of debug, info, warn, error or a verbosity 0-127", s)
	}
	return zapcore.Level(-n), nil
}
