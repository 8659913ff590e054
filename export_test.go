package msgtrace

// EarlyConfig is earlyConfig, for the external tests.
var EarlyConfig = earlyConfig

// EnvWaits is envWaits, for the external tests.
var EnvWaits = envWaits
