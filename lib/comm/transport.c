/*
 * The calls every transport shares (see transport.h): the checks of their
 * arguments, blocking messages built on the non-blocking ones, and the
 * local transport, a job of one process, where nothing crosses and these
 * calls answer alone.  The MPI transport is in world.c.
 */
#include <config.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/codec.h"
#include "comm/transport.h"

static atomic_ullong bytes_sent;

unsigned long long sn_transport_bytes_sent(void)
{
    return atomic_load(&bytes_sent);
}

/* Nothing crosses in one process: no member is ever called. */
static const sn_transport_ops local_ops = {.name = "local"};

static sn_transport local_transport = {
    .ops = &local_ops, .process = 0, .processes = 1};

sn_transport *sn_transport_local(void)
{
    return &local_transport;
}

/* A message's peer must be another process of the job. */
static shardnet_status check_peer(const sn_transport *t, const char *what,
                                  unsigned peer)
{
    if (peer >= t->processes)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s: no process %u (a job of %u, %s transport)", what,
                        peer, t->processes, t->ops->name);
    if (peer == t->process)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s: process %u is this process", what, peer);
    return SHARDNET_OK;
}

shardnet_status sn_transport_isend(sn_transport *t, unsigned dst, int tag,
                                   const void *buf, size_t bytes,
                                   sn_transport_req **req)
{
    shardnet_status st = check_peer(t, "send", dst);
    *req = NULL;
    if (st != SHARDNET_OK)
        return st;
    atomic_fetch_add(&bytes_sent, bytes);
    return t->ops->isend(t, dst, tag, buf, bytes, req);
}

shardnet_status sn_transport_irecv(sn_transport *t, unsigned src, int tag,
                                   void *buf, size_t bytes,
                                   sn_transport_req **req)
{
    shardnet_status st = check_peer(t, "receive", src);
    *req = NULL;
    return st != SHARDNET_OK ? st
                             : t->ops->irecv(t, src, tag, buf, bytes, req);
}

shardnet_status sn_transport_wait(sn_transport *t, sn_transport_req *req)
{
    return req ? t->ops->wait(t, req) : SHARDNET_OK;
}

shardnet_status sn_transport_send(sn_transport *t, unsigned dst, int tag,
                                  const void *buf, size_t bytes)
{
    sn_transport_req *req;
    shardnet_status st = sn_transport_isend(t, dst, tag, buf, bytes, &req);
    return st != SHARDNET_OK ? st : sn_transport_wait(t, req);
}

shardnet_status sn_transport_recv(sn_transport *t, unsigned src, int tag,
                                  void *buf, size_t bytes)
{
    sn_transport_req *req;
    shardnet_status st = sn_transport_irecv(t, src, tag, buf, bytes, &req);
    return st != SHARDNET_OK ? st : sn_transport_wait(t, req);
}

shardnet_status sn_transport_bcast(sn_transport *t, unsigned root, void *buf,
                                   size_t bytes)
{
    if (root >= t->processes)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "broadcast: no process %u (a job of %u)", root,
                        t->processes);
    if (t->processes == 1 || !bytes)
        return SHARDNET_OK;
    if (root == t->process)
        atomic_fetch_add(&bytes_sent, bytes * (t->processes - 1));
    return t->ops->bcast(t, root, buf, bytes);
}

shardnet_status sn_transport_bcast_floats(sn_transport *t, unsigned root,
                                          int codec, float *x, size_t n,
                                          unsigned char **wire, size_t *cap,
                                          int *form)
{
    shardnet_status st;
    if (codec <= SN_CODEC_FP32 || codec >= SN_CODEC_COUNT || !n ||
        n > SN_CODEC_MAX_N || t->processes == 1)
        return sn_transport_bcast(t, root, x, n * sizeof *x);
    size_t bound = sn_codec_bound(n);
    uint64_t len = UINT64_MAX; /* not encoded */
    if (*cap < bound) {
        unsigned char *w = realloc(*wire, bound);
        if (w) {
            *wire = w;
            *cap = bound;
        }
    }
    if (root == t->process && *cap >= bound) {
        sn_codec_form f = SN_CODEC_DENSE;
        size_t m = sn_codec_encode((sn_codec)codec, x, n, *wire, &f);
        if (m)
            len = m;
        if (form)
            *form = (int)f;
    }
    if ((st = sn_transport_bcast(t, root, &len, sizeof len)) != SHARDNET_OK)
        return st;
    if (len > bound)
        return sn_error(SHARDNET_OUT_OF_MEMORY,
                        "%zu values from process %u in %s: not encoded "
                        "(no memory for the message)",
                        n, root, sn_codec_name((sn_codec)codec));
    if (*cap < len)
        return sn_error(SHARDNET_OUT_OF_MEMORY,
                        "%zu values from process %u in %s: no memory for "
                        "the message",
                        n, root, sn_codec_name((sn_codec)codec));
    if ((st = sn_transport_bcast(t, root, *wire, (size_t)len)) != SHARDNET_OK)
        return st;
    size_t used = 0;
    if ((st = sn_codec_decode(*wire, (size_t)len, x, n, &used)) !=
        SHARDNET_OK)
        return st;
    if (used != len)
        return sn_error(SHARDNET_INTERNAL,
                        "%zu values from process %u: %zu bytes of their "
                        "message left over",
                        n, root, (size_t)len - used);
    return SHARDNET_OK;
}

shardnet_status sn_transport_allgather(sn_transport *t, const void *mine,
                                       size_t bytes, void *all)
{
    if (t->processes == 1 || !bytes) {
        if (bytes && all != mine)
            memmove(all, mine, bytes);
        return SHARDNET_OK;
    }
    atomic_fetch_add(&bytes_sent, bytes * (t->processes - 1));
    return t->ops->allgather(t, mine, bytes, all);
}
