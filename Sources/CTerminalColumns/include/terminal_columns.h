#ifndef SIMP_TERMINAL_COLUMNS_H
#define SIMP_TERMINAL_COLUMNS_H

#include <stdint.h>

/// The columns a terminal gives the Unicode scalar `scalar`, as the C library's wcwidth(3)
/// answers in a UTF-8 locale: 0, 1 or 2, or -1 for a scalar it calls non-printable (a control
/// character). The answer does not depend on the process's locale (LANG=C included): the call
/// switches the calling thread to a UTF-8 LC_CTYPE (C.UTF-8, else en_US.UTF-8) and back.
/// Returns -2 when no UTF-8 locale is installed.
int simp_terminal_columns(uint32_t scalar);

#endif
