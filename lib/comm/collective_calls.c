/*
 * The host-staged collectives' entry points: each call is checked (views
 * on their ranks' devices, inside their buffers, in place or apart) and
 * described as a job over a global index space, then run by the chunk
 * pipeline of collective.c.  See comm/collective.h.
 */
#include <config.h>

#include <stdint.h>

#include "comm/collective_impl.h"


/* --- validation --------------------------------------------------------- */

static shardnet_status check_view(const sn_comm *c, job_op op, const char *what,
                                  size_t r, sn_view v, size_t count)
{
    size_t end;
    if (!v.buf)
        return count ? sn_error(SHARDNET_INVALID_ARGUMENT,
                                "%s: %s[%zu] has no buffer",
                                sn_comm_op_name(op), what, r)
                     : SHARDNET_OK;
    if (v.buf->dev != c->devs[r])
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s: %s[%zu] is on %s, but rank %zu is %s",
                        sn_comm_op_name(op), what, r, v.buf->dev->info.name, r,
                        c->devs[r]->info.name);
    if (v.offset > SIZE_MAX / sizeof(float) - count ||
        (end = v.offset + count) > v.buf->size / sizeof(float))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s: %s[%zu] on %s needs floats [%zu, %zu+%zu), "
                        "outside a buffer of %zu floats",
                        sn_comm_op_name(op), what, r, v.buf->dev->info.name,
                        v.offset, v.offset, count,
                        v.buf->size / sizeof(float));
    (void)end;
    return SHARDNET_OK;
}

/* A rank's input and output may share memory only element for element. */
static shardnet_status check_overlap(const sn_comm *c, job_op op, size_t r)
{
    const worker *w = &c->w[r];
    size_t il = w->ihi - w->ilo, ol = w->ohi - w->olo;

    if (!il || !ol || w->in.buf != w->out.buf)
        return SHARDNET_OK;
    if (w->in.offset + il <= w->out.offset ||
        w->out.offset + ol <= w->in.offset)
        return SHARDNET_OK;
    /* Same address for the same global index: in place, allowed. */
    if (w->in.offset + w->olo == w->out.offset + w->ilo)
        return SHARDNET_OK;
    return sn_error(SHARDNET_INVALID_ARGUMENT,
                    "%s: rank %zu's input (floats [%zu, %zu)) and output "
                    "(floats [%zu, %zu)) overlap on %s without being in place",
                    sn_comm_op_name(op), r, w->in.offset, w->in.offset + il,
                    w->out.offset, w->out.offset + ol,
                    c->devs[r]->info.name);
}

static shardnet_status begin(sn_comm *c, job_op op, const void *p)
{
    if (!c)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s: comm is NULL",
                        sn_comm_op_name(op));
    if (!p)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s: NULL argument",
                        sn_comm_op_name(op));
    c->op = op;
    for (size_t r = 0; r < c->n; r++) {
        worker *w = &c->w[r];
        w->in.buf = w->out.buf = NULL;
        w->in.offset = w->out.offset = 0;
        w->ilo = w->ihi = w->olo = w->ohi = 0;
    }
    return SHARDNET_OK;
}

static shardnet_status finish_checks(sn_comm *c)
{
    shardnet_status st;
    for (size_t r = 0; r < c->n; r++) {
        worker *w = &c->w[r];
        st = check_view(c, c->op, "input", r, w->in, w->ihi - w->ilo);
        if (st == SHARDNET_OK)
            st = check_view(c, c->op, "output", r, w->out, w->ohi - w->olo);
        if (st == SHARDNET_OK)
            st = check_overlap(c, c->op, r);
        if (st != SHARDNET_OK)
            return st;
    }
    return SHARDNET_OK;
}

/* Sum of counts with overflow checking; fills offsets (n + 1). */
static shardnet_status prefix(const sn_comm *c, job_op op,
                              const size_t *counts, size_t *offsets)
{
    offsets[0] = 0;
    for (size_t r = 0; r < c->n; r++) {
        if (counts[r] > SIZE_MAX / sizeof(float) - offsets[r])
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "%s: counts overflow at rank %zu",
                            sn_comm_op_name(op), r);
        offsets[r + 1] = offsets[r] + counts[r];
    }
    return SHARDNET_OK;
}

/* --- public entry points ----------------------------------------------- */

shardnet_status sn_allreduce(sn_comm *c, const sn_view *bufs, size_t count)
{
    shardnet_status st = begin(c, OP_ALLREDUCE, bufs);
    if (st != SHARDNET_OK)
        return st;
    c->mode = JOB_REDUCE;
    c->total = count;
    for (size_t r = 0; r < c->n; r++) {
        worker *w = &c->w[r];
        w->in = w->out = bufs[r];
        w->ihi = w->ohi = count;
    }
    st = finish_checks(c);
    if (st != SHARDNET_OK || count == 0)
        return st;
    return sn_comm_run(c);
}

shardnet_status sn_allgather(sn_comm *c, const sn_view *send,
                             const size_t *counts, const sn_view *recv)
{
    size_t off[SN_COMM_MAX + 1];
    shardnet_status st = begin(c, OP_ALLGATHER, send);
    if (st != SHARDNET_OK)
        return st;
    if (!counts || !recv)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "all-gather: NULL argument");
    st = prefix(c, OP_ALLGATHER, counts, off);
    if (st != SHARDNET_OK)
        return st;
    c->mode = JOB_GATHER;
    c->total = off[c->n];
    for (size_t r = 0; r < c->n; r++) {
        worker *w = &c->w[r];
        w->in = send[r];
        w->ilo = off[r];
        w->ihi = off[r + 1];
        w->out = recv[r];
        w->olo = 0;
        w->ohi = c->total;
    }
    st = finish_checks(c);
    if (st != SHARDNET_OK || c->total == 0)
        return st;
    return sn_comm_run(c);
}

shardnet_status sn_reduce_scatter(sn_comm *c, const sn_view *send,
                                  const size_t *counts, const sn_view *recv)
{
    size_t off[SN_COMM_MAX + 1];
    shardnet_status st = begin(c, OP_REDUCE_SCATTER, send);
    if (st != SHARDNET_OK)
        return st;
    if (!counts || !recv)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "reduce-scatter: NULL argument");
    st = prefix(c, OP_REDUCE_SCATTER, counts, off);
    if (st != SHARDNET_OK)
        return st;
    c->mode = JOB_REDUCE;
    c->total = off[c->n];
    for (size_t r = 0; r < c->n; r++) {
        worker *w = &c->w[r];
        w->in = send[r];
        w->ilo = 0;
        w->ihi = c->total;
        w->out = recv[r];
        w->olo = off[r];
        w->ohi = off[r + 1];
    }
    st = finish_checks(c);
    if (st != SHARDNET_OK || c->total == 0)
        return st;
    return sn_comm_run(c);
}

shardnet_status sn_broadcast(sn_comm *c, const sn_view *bufs, size_t count,
                             size_t root)
{
    shardnet_status st = begin(c, OP_BROADCAST, bufs);
    if (st != SHARDNET_OK)
        return st;
    if (root >= c->n)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "broadcast: root %zu, but the comm has %zu ranks",
                        root, c->n);
    c->mode = JOB_GATHER;
    c->total = count;
    for (size_t r = 0; r < c->n; r++) {
        worker *w = &c->w[r];
        if (r == root) {
            w->in = bufs[r];
            w->ihi = count;
        } else {
            w->out = bufs[r];
            w->ohi = count;
        }
    }
    st = finish_checks(c);
    if (st != SHARDNET_OK || count == 0)
        return st;
    return sn_comm_run(c);
}

shardnet_status sn_sendrecv(sn_comm *c, size_t src, sn_view send, size_t dst,
                            sn_view recv, size_t count)
{
    shardnet_status st = begin(c, OP_SENDRECV, &send);
    if (st != SHARDNET_OK)
        return st;
    if (src >= c->n || dst >= c->n)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "send/recv: ranks %zu -> %zu, but the comm has %zu",
                        src, dst, c->n);
    c->mode = JOB_GATHER;
    c->total = count;
    c->w[src].in = send;
    c->w[src].ihi = count;
    c->w[dst].out = recv;
    c->w[dst].ohi = count;
    st = finish_checks(c);
    if (st != SHARDNET_OK || count == 0)
        return st;
    if (src == dst && send.buf == recv.buf && send.offset == recv.offset)
        return SHARDNET_OK;
    return sn_comm_run(c);
}
