/* Minimal CoreFoundation declarations for cross-building msgtrace (see CFBase.h). */
#ifndef MSGTRACE_SDK_CFSTRING_H
#define MSGTRACE_SDK_CFSTRING_H

#include <CoreFoundation/CFBase.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
	kCFStringEncodingMacRoman = 0,
	kCFStringEncodingASCII = 0x0600,
	kCFStringEncodingUTF8 = 0x08000100,
};

/* A compile-time constant CFString: clang emits it (class ___CFConstantStringClassReference). */
#define CFSTR(cStr) ((CFStringRef)__builtin___CFStringMakeConstantString("" cStr ""))

CFStringRef CFStringCreateWithCString(CFAllocatorRef alloc, const char *cStr, CFStringEncoding encoding);
Boolean CFStringGetCString(CFStringRef theString, char *buffer, CFIndex bufferSize, CFStringEncoding encoding);
CFIndex CFStringGetLength(CFStringRef theString);

#ifdef __cplusplus
}
#endif
#endif
