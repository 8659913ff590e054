// Package msgtrace traces Objective-C message sends: assembly interposers for objc_msgSend and
// its variants (msgsend_amd64.S) record, per thread and without a call into Go or C on the hot
// path, when each method starts and ends; the C recorder (rt*.c, its files listed in
// rt_internal.h) registers threads and hands the records over in chunks, and the drain
// (drain*.c, listed in drain_internal.h) encodes them into the stream file as the program runs.
// machobind puts the interposers into the images' pointer slots.
package msgtrace
