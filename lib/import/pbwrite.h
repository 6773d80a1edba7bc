/*
 * A small writer of the protobuf wire format (private): the other half of
 * pbwire.h, for what shardnet writes in ONNX's format (shardnet quantize,
 * lib/api/quantize.c; the generated models of tools/make_big_model).  A
 * message grows in memory; running out of memory is remembered (failed)
 * and reported once, by whoever finishes the message.
 */
#ifndef SN_PBWRITE_H
#define SN_PBWRITE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sn_pbw {
    uint8_t *p;
    size_t n, cap;
    int failed; /* a write found no memory: the bytes are incomplete */
} sn_pbw;

/* Bytes a varint of v takes on the wire. */
size_t sn_pbw_varint_len(uint64_t v);
void sn_pbw_raw(sn_pbw *w, const void *d, size_t n);
void sn_pbw_varint(sn_pbw *w, uint64_t v);
void sn_pbw_tag(sn_pbw *w, unsigned field, unsigned wire);
/* A VARINT field (int64, enums). */
void sn_pbw_int(sn_pbw *w, unsigned field, int64_t v);
/* A LEN field: bytes, a string, or a message held in sub (which it
 * empties; a failed sub fails w). */
void sn_pbw_bytes(sn_pbw *w, unsigned field, const void *d, size_t n);
void sn_pbw_str(sn_pbw *w, unsigned field, const char *s);
void sn_pbw_msg(sn_pbw *w, unsigned field, sn_pbw *sub);
void sn_pbw_free(sn_pbw *w);

#endif /* SN_PBWRITE_H */
