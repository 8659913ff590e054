/* Minimal CoreFoundation declarations for cross-building msgtrace (see CFBase.h). */
#ifndef MSGTRACE_SDK_CFURL_H
#define MSGTRACE_SDK_CFURL_H

#include <CoreFoundation/CFBase.h>

#ifdef __cplusplus
extern "C" {
#endif

CFStringRef CFURLGetString(CFURLRef anURL);

#ifdef __cplusplus
}
#endif
#endif
