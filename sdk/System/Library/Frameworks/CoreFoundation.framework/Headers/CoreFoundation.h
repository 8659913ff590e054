/* Minimal CoreFoundation umbrella for cross-building msgtrace (see CFBase.h). */
#ifndef MSGTRACE_SDK_COREFOUNDATION_H
#define MSGTRACE_SDK_COREFOUNDATION_H
#include <CoreFoundation/CFBase.h>
#include <CoreFoundation/CFString.h>
#include <CoreFoundation/CFURL.h>
#include <CoreFoundation/CFBundle.h>
#endif
