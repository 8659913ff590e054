package msgtrace

// EarlyConfig is earlyConfig, for the external tests.
var EarlyConfig = earlyConfig
