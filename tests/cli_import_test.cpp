// weightctl import and export of real model directories (SPEC §7): symlinks, unreadable entries, path segments, parallel uploads, resume.
#include <doctest/doctest.h>
