// Package msgtrace traces Objective-C message sends: assembly interposers for objc_msgSend and
// its variants (msgsend_amd64.S) record, per thread and without a call into Go or C on the hot
// path, when each method starts and ends; the C runtime (rt.c) registers threads and hands the
// records out. machobind puts the interposers into the images' pointer slots.
package msgtrace
