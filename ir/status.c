/* AmpStatus helpers: first failure wins, context is prefixed on the way out. */
#include "ir/fail.h"
#include "ir/front.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

AmpCode amp_fail(AmpStatus *st, AmpCode code, const char *fmt, ...) {
    if (!st || st->code != AMP_OK) return code;
    st->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
    return code;
}

void amp_status_prefix(AmpStatus *st, const char *fmt, ...) {
    if (!st) return;
    char head[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    /* Truncation is fine: the head is short and the tail is the least useful part. */
    char tmp[sizeof st->msg];
    size_t hl = strlen(head), ml = strlen(st->msg);
    if (hl > sizeof tmp - 1) hl = sizeof tmp - 1;
    if (ml > sizeof tmp - 1 - hl) ml = sizeof tmp - 1 - hl;
    memcpy(tmp, head, hl);
    memcpy(tmp + hl, st->msg, ml);
    tmp[hl + ml] = '\0';
    memcpy(st->msg, tmp, hl + ml + 1);
}

void amp_status_clear(AmpStatus *st) {
    if (!st) return;
    st->code = AMP_OK;
    st->msg[0] = '\0';
}

const char *amp_code_name(AmpCode code) {
    switch (code) {
    case AMP_OK: return "ok";
    case AMP_ERR_INPUT: return "bad input";
    case AMP_ERR_USAGE: return "usage";
    case AMP_ERR_UNSUPPORTED: return "unsupported";
    case AMP_ERR_INTERNAL: return "internal error";
    }
    return "?";
}

static AmpFront caller_front = AMP_FRONT_C;

void amp_front_set(AmpFront front) {
    caller_front = front;
}

AmpFront amp_front(void) {
    return caller_front;
}
