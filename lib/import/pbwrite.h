/*
 * A small writer of the protobuf wire format (private), the other half of
 * pbwire.h: lib/import/onnx_write.c writes models with it.
 *
 * A message is built as a list of pieces: bytes of the writer's own
 * (tags, lengths, names, small payloads, copied) and bytes of the
 * caller's, referenced where they lie (a weight in the mapped model file,
 * a quantized weight the caller keeps), so that writing a model copies no
 * weight in memory.  A length-delimited field needs its length before its
 * payload: a nested message is built in a writer of its own, then added
 * to its parent whole (sn_pbw_message), its referenced pieces still
 * referenced.
 *
 * Calls do not fail one by one: the first allocation that fails marks the
 * writer, every later call does nothing, and sn_pbw_check() reports it.
 */
#ifndef SN_PBWRITE_H
#define SN_PBWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "shardnet.h"

/* A run of bytes: the caller's (ext) or the writer's own, from off. */
typedef struct sn_pbw_piece {
    const uint8_t *ext;
    size_t off, len;
} sn_pbw_piece;

typedef struct sn_pbw {
    uint8_t *own;          /* the writer's own bytes */
    size_t own_len, own_cap;
    sn_pbw_piece *pieces;  /* the message, in order */
    size_t npieces, cap_pieces;
    uint64_t size;         /* bytes of the message */
    int failed;            /* an allocation failed: the message is lost */
} sn_pbw;

/* An empty message (or = {0}); sn_pbw_free releases it. */
void sn_pbw_init(sn_pbw *w);
void sn_pbw_free(sn_pbw *w);

/* n bytes at p, copied. */
void sn_pbw_bytes(sn_pbw *w, const void *p, size_t n);
/* n bytes at p, referenced: they must stay until the message is written
 * (short runs are copied all the same). */
void sn_pbw_ref(sn_pbw *w, const void *p, size_t n);
/* The bytes of message sub, as they are (a copy of its own bytes, its
 * references kept). */
void sn_pbw_append(sn_pbw *w, const sn_pbw *sub);

/* The wire's parts: a varint, a field's tag. */
void sn_pbw_varint(sn_pbw *w, uint64_t v);
void sn_pbw_tag(sn_pbw *w, uint32_t num, unsigned wire);

/* Whole fields numbered num: an integer (VARINT; a negative int64 as its
 * two's complement, as protobuf writes int64), a float (I32), a string,
 * bytes copied or referenced, and a nested message. */
void sn_pbw_int(sn_pbw *w, uint32_t num, int64_t v);
void sn_pbw_float(sn_pbw *w, uint32_t num, float v);
void sn_pbw_string(sn_pbw *w, uint32_t num, const char *s);
void sn_pbw_len(sn_pbw *w, uint32_t num, const void *p, size_t n);
void sn_pbw_len_ref(sn_pbw *w, uint32_t num, const void *p, size_t n);
void sn_pbw_message(sn_pbw *w, uint32_t num, const sn_pbw *sub);

/* SHARDNET_OUT_OF_MEMORY naming what when an allocation failed, else
 * SHARDNET_OK. */
shardnet_status sn_pbw_check(const sn_pbw *w, const char *what);

/*
 * The message written to the file at path: under a temporary name in the
 * same folder, then renamed over path, so that a full disk or a crash
 * leaves the old file or none, never half of one (and path may be the
 * file the referenced bytes are mapped from).  SHARDNET_IO_ERROR naming
 * path and why.
 */
shardnet_status sn_pbw_write_file(const sn_pbw *w, const char *path);

#endif /* SN_PBWRITE_H */
