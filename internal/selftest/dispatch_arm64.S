/* The test dispatcher with objc_msgSend's contract (shared with the interposer's tests). */
#include "../../testdata/interposer/runtime_arm64.S"
