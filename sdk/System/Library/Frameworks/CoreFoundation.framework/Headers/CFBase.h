/* Minimal CoreFoundation declarations for cross-building msgtrace from Linux (scripts/cross.sh).
 * Written for this project from the public C API's names and documented values; only what
 * Go's runtime/cgo (gcc_darwin_arm64.c, iOS) and our own sources use. Not Apple's header. */
#ifndef MSGTRACE_SDK_CFBASE_H
#define MSGTRACE_SDK_CFBASE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef unsigned char Boolean;
typedef signed long CFIndex;
typedef unsigned long CFOptionFlags;
typedef uint32_t CFStringEncoding;
typedef const void *CFTypeRef;
typedef const struct __CFAllocator *CFAllocatorRef;
typedef const struct __CFString *CFStringRef;
typedef struct __CFString *CFMutableStringRef;
typedef const struct __CFURL *CFURLRef;
typedef struct __CFBundle *CFBundleRef;
typedef const struct __CFDictionary *CFDictionaryRef;
typedef const struct __CFArray *CFArrayRef;

extern const CFAllocatorRef kCFAllocatorDefault;
extern const CFAllocatorRef kCFAllocatorNull;

CFTypeRef CFRetain(CFTypeRef cf);
void CFRelease(CFTypeRef cf);

#ifdef __cplusplus
}
#endif
#endif
