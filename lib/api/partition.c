/*
 * The notation of device partitions in device lists (partition.h): units
 * by index, "cpu:0[2-3]", or even parts, "cpu:0/2" (both halves) and
 * "cpu:0/2.1" (the second).  A partition's name is always its units'
 * form, so that two spellings of the same cores are one device.
 */
#include <config.h>

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/partition.h"
#include "core/error.h"

/* A plain decimal number at *p (digits only, up to UINT_MAX), *p moved
 * past it; 0 where there is none. */
static int number(const char **p, unsigned *v)
{
    unsigned long long x = 0;
    const char *s = *p;
    if (!isdigit((unsigned char)*s))
        return 0;
    for (; isdigit((unsigned char)*s); s++) {
        x = 10 * x + (unsigned)(*s - '0');
        if (x > UINT_MAX)
            return 0;
    }
    *v = (unsigned)x;
    *p = s;
    return 1;
}

/* Units "[A]" or "[A-B]". */
static shardnet_status units_range(const char *item, const char *s,
                                   const char *device, unsigned units,
                                   const char *unit, sn_part *out)
{
    unsigned a, b;
    s++; /* '[' */
    if (!number(&s, &a))
        goto syntax;
    b = a;
    if (*s == '-' && (s++, !number(&s, &b)))
        goto syntax;
    if (*s != ']' || s[1] != '\0')
        goto syntax;
    if (b < a)
        return sn_error(SHARDNET_NO_DEVICE,
                        "bad device '%s': an empty range of %s's %ss (%u "
                        "to %u: the first is after the last)",
                        item, device, unit, a, b);
    if (b >= units)
        return sn_error(SHARDNET_NO_DEVICE,
                        "bad device '%s': %s has %u %s%s (0 to %u), no "
                        "%s %u",
                        item, device, units, unit, units == 1 ? "" : "s",
                        units ? units - 1 : 0, unit, b);
    out->first = a;
    out->count = b - a + 1;
    return SHARDNET_OK;
syntax:
    return sn_error(SHARDNET_NO_DEVICE,
                    "bad device '%s': expected %ss as [A] or [A-B] after "
                    "%s, such as %s[0-1]",
                    item, unit, device, device);
}

shardnet_status sn_partition_parse(const char *item, const char *suffix,
                                   const char *device, unsigned units,
                                   const char *unit, sn_part **parts,
                                   size_t *n)
{
    const char *s = suffix;
    unsigned cut, only = 0;
    int one = 0;
    shardnet_status st;

    *parts = NULL;
    *n = 0;
    if (*s == '[') {
        sn_part p;
        if ((st = units_range(item, s, device, units, unit, &p)) != SHARDNET_OK)
            return st;
        if (!(*parts = malloc(sizeof **parts)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "device list");
        (*parts)[0] = p;
        *n = 1;
        return SHARDNET_OK;
    }
    s++; /* '/' */
    if (!number(&s, &cut) ||
        (*s == '.' && (one = 1, s++, !number(&s, &only))) || *s != '\0')
        return sn_error(SHARDNET_NO_DEVICE,
                        "bad device '%s': expected a count of parts after "
                        "'/', and '.' and a part after it, such as %s/2 or "
                        "%s/2.0",
                        item, device, device);
    if (cut == 0 || cut > units)
        return sn_error(SHARDNET_NO_DEVICE,
                        "bad device '%s': %s has %u %s%s, which cannot be "
                        "cut into %u part%s of whole %ss",
                        item, device, units, unit, units == 1 ? "" : "s",
                        cut, cut == 1 ? "" : "s", unit);
    if (one && only >= cut)
        return sn_error(SHARDNET_NO_DEVICE,
                        "bad device '%s': no part %u of %u (parts are "
                        "numbered 0 to %u)",
                        item, only, cut, cut - 1);
    if (!(*parts = calloc(one ? 1 : cut, sizeof **parts)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "device list");
    for (unsigned i = one ? only : 0; i < (one ? only + 1 : cut); i++) {
        /* Part i: units [i * units / cut, (i + 1) * units / cut). */
        unsigned lo = (unsigned)((unsigned long long)i * units / cut);
        unsigned hi = (unsigned)((unsigned long long)(i + 1) * units / cut);
        (*parts)[(*n)++] = (sn_part){lo, hi - lo};
    }
    return SHARDNET_OK;
}

int sn_partition_name(char *buf, size_t cap, const char *device, sn_part p)
{
    int w = p.count == 1 ? snprintf(buf, cap, "%s[%u]", device, p.first)
                         : snprintf(buf, cap, "%s[%u-%u]", device, p.first,
                                    p.first + p.count - 1);
    return w >= 0 && (size_t)w < cap;
}
