package sink

// For the tests of package sink_test: the output writer's block size.
const OutBlock = outBlock
