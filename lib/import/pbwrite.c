/* The protobuf wire writer (pbwrite.h). */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "import/pbwire.h"
#include "import/pbwrite.h"

size_t sn_pbw_varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

void sn_pbw_raw(sn_pbw *w, const void *d, size_t n)
{
    if (w->failed || !n)
        return;
    if (w->n + n > w->cap) {
        size_t cap = (w->n + n) * 2 + 64;
        uint8_t *p = realloc(w->p, cap);
        if (!p) {
            w->failed = 1;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->n, d, n);
    w->n += n;
}

void sn_pbw_varint(sn_pbw *w, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    do {
        b[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            b[n] |= 0x80;
        n++;
    } while (v);
    sn_pbw_raw(w, b, n);
}

void sn_pbw_tag(sn_pbw *w, unsigned field, unsigned wire)
{
    sn_pbw_varint(w, (uint64_t)field << 3 | wire);
}

void sn_pbw_int(sn_pbw *w, unsigned field, int64_t v)
{
    sn_pbw_tag(w, field, SN_PB_VARINT);
    sn_pbw_varint(w, (uint64_t)v);
}

void sn_pbw_bytes(sn_pbw *w, unsigned field, const void *d, size_t n)
{
    sn_pbw_tag(w, field, SN_PB_LEN);
    sn_pbw_varint(w, n);
    sn_pbw_raw(w, d, n);
}

void sn_pbw_str(sn_pbw *w, unsigned field, const char *s)
{
    sn_pbw_bytes(w, field, s, strlen(s));
}

void sn_pbw_msg(sn_pbw *w, unsigned field, sn_pbw *sub)
{
    if (sub->failed)
        w->failed = 1;
    else
        sn_pbw_bytes(w, field, sub->p, sub->n);
    sn_pbw_free(sub);
}

void sn_pbw_free(sn_pbw *w)
{
    free(w->p);
    memset(w, 0, sizeof *w);
}
