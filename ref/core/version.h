/* refenc's version: the golden files' "generator" metadata, refenc.pc and
 * `refenc --version` read it from here. */
#ifndef REFENC_CORE_VERSION_H
#define REFENC_CORE_VERSION_H

#define REFENC_VERSION "0.1.0"

#endif
