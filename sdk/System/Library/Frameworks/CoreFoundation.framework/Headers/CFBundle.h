/* Minimal CoreFoundation declarations for cross-building msgtrace (see CFBase.h). */
#ifndef MSGTRACE_SDK_CFBUNDLE_H
#define MSGTRACE_SDK_CFBUNDLE_H

#include <CoreFoundation/CFBase.h>
#include <CoreFoundation/CFString.h>
#include <CoreFoundation/CFURL.h>

#ifdef __cplusplus
extern "C" {
#endif

CFBundleRef CFBundleGetMainBundle(void);
CFURLRef CFBundleCopyResourceURL(CFBundleRef bundle, CFStringRef resourceName, CFStringRef resourceType, CFStringRef subDirName);
CFTypeRef CFBundleGetValueForInfoDictionaryKey(CFBundleRef bundle, CFStringRef key);

#ifdef __cplusplus
}
#endif
#endif
