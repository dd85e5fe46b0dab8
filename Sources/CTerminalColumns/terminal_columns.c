#define _XOPEN_SOURCE 700
#define _GNU_SOURCE
#include "terminal_columns.h"

#include <locale.h>
#include <pthread.h>
#include <wchar.h>
#if defined(__APPLE__)
#include <xlocale.h>
#endif

static locale_t utf8_ctype = (locale_t)0;
static pthread_once_t utf8_ctype_once = PTHREAD_ONCE_INIT;

/// wcwidth(3) answers -1 for every non-ASCII character in the C locale, which is the locale of
/// a process that never calls setlocale (every Swift program) and of LANG=C; so the width is
/// always asked in a UTF-8 locale of its own, whatever the process's is.
static void open_utf8_ctype(void) {
    static const char *const names[] = {"C.UTF-8", "C.utf8", "en_US.UTF-8"};
    for (unsigned i = 0; i < sizeof names / sizeof names[0] && utf8_ctype == (locale_t)0; i++) {
        utf8_ctype = newlocale(LC_CTYPE_MASK, names[i], (locale_t)0);
    }
}

int simp_terminal_columns(uint32_t scalar) {
    pthread_once(&utf8_ctype_once, open_utf8_ctype);
    if (utf8_ctype == (locale_t)0) return -2;
    locale_t previous = uselocale(utf8_ctype);
    int columns = wcwidth((wchar_t)scalar);
    uselocale(previous);
    return columns;
}
