package msgtrace

// HopsEnv is hopsEnv, for the external tests.
var HopsEnv = hopsEnv
