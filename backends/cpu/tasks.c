/*
 * The CPU backend's tasks: what a kernel or an asynchronous copy does once
 * its turn comes on the device's queue (queue.c), on the worker or on the
 * thread that drives the device: the cpu/ kernel it calls on its buffers'
 * host memory, or the copy between a buffer and the caller's memory.
 * GEMMs with a constant B (a weight) use a packed copy of B, kept per
 * device until B's buffer is freed; where B is read in place from the
 * model's mapped file, its pages are dropped once packed.  One row by a
 * constant B^T (batch 1 through a weight stored [N, K]) makes no packed
 * copy: dot products with B's rows where they lie (cpu/sgemm_avx512.c);
 * one row by a B not transposed reads it in place too, until a product of
 * more rows has packed it (the same bits either way).
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "cpu.h"

static float *view_ptr(sn_view v)
{
    return (float *)((cpu_buf *)v.buf)->host + v.offset;
}

/* An optional operand (a bias): NULL when the view has no buffer. */
static const float *view_ptr_or_null(sn_view v)
{
    return v.buf ? view_ptr(v) : NULL;
}

/* The bytes of a queued copy in its buffer's memory. */
static char *copy_ptr(const host_copy *h)
{
    return (char *)((cpu_buf *)h->buf)->host + h->offset;
}

/* Gather's indices: int32 stored bit for bit, the offset in 4-byte units. */
static const int32_t *index_ptr(sn_view v)
{
    return (const int32_t *)((cpu_buf *)v.buf)->host + v.offset;
}

/* The packed copy of d's constant B, made now if missing (unless
 * only_found); NULL where the AVX-512 kernel does not take d, memory is
 * short or, with only_found, there is none yet. */
static const sn_cpu_packed_b *packed_b(cpu_device *cd, const sn_gemm_desc *d,
                                       int only_found)
{
    packed_entry *e;
    sn_cpu_packed_b *pb = NULL;

    if (!d->b_const || !sn_cpu_sgemm_avx512_supports(d) ||
        !sn_cpu_sgemm_avx512_worth(d, 1))
        return NULL;
    pthread_mutex_lock(&cd->pack_lock);
    for (e = cd->packs; e; e = e->next)
        if (e->buf == d->b.buf && e->offset == d->b.offset &&
            e->ldb == d->ldb && e->trans_b == !!d->trans_b && e->k == d->k &&
            e->n == d->n) {
            pb = e->pb;
            break;
        }
    pthread_mutex_unlock(&cd->pack_lock);
    if (pb || only_found)
        return pb;
    /* Packed outside the lock: only this worker adds entries, and the
     * buffer cannot be freed while its task runs (sn_cpu_buffer_free
     * drains). */
    cpu_buf *cb = (cpu_buf *)d->b.buf;
    if (!sn_cpu_buffer_host(cb))
        return NULL;
    e = malloc(sizeof *e);
    pb = e ? sn_cpu_packed_b_alloc(d->k, d->n) : NULL;
    if (!pb) {
        free(e);
        return NULL;
    }
    sn_cpu_pack_b(pb, d, view_ptr(d->b));
    cd->packed_bytes += d->k * d->n * sizeof(float);
    sn_progress(d->b.buf->dev->config, &cd->pack_stamp, 0, cd->packed_bytes,
                0, "packing weights on %s", d->b.buf->dev->info.name);
    *e = (packed_entry){d->b.buf, d->b.offset, d->ldb, d->k, d->n,
                        !!d->trans_b, pb, NULL};
    pthread_mutex_lock(&cd->pack_lock);
    e->next = cd->packs;
    cd->packs = e;
    pthread_mutex_unlock(&cd->pack_lock);
    /* The packed copy replaces B: a weight read in place from the model's
     * file lets its pages go (they come back from the file if read), a
     * buffer of its own that holds B and nothing else gives its memory
     * back (unpacked again if anything else reads it). */
    if (d->n)
        sn_cpu_buffer_drop_pages(
            d->b.buf, view_ptr(d->b),
            ((d->trans_b ? d->n : d->k) - 1) * d->ldb * sizeof(float) +
                (d->trans_b ? d->k : d->n) * sizeof(float));
    sn_cpu_buffer_replace(cd, cb, e);
    return pb;
}

/* The memory of every buffer t uses, restored where a packed copy replaced
 * it (but a GEMM's B, which the packed copy may serve: skip_b); 0, the
 * task's failure noted, when out of memory for that. */
static int buffers_ready(cpu_device *cd, const task *t, int skip_b)
{
    sn_view *v[8];
    sn_kernel_desc *u = (sn_kernel_desc *)&t->u; /* only read */
    size_t n = t->kind < SN_KERNEL_COUNT ? sn_kernel_views(t->kind, u, v) : 0;
    sn_buffer *copy = t->kind >= SN_KERNEL_COUNT ? t->host.buf : NULL;
    for (size_t i = 0; i <= n; i++) {
        sn_buffer *b = i < n ? v[i]->buf : copy;
        if (!b || (skip_b && t->kind == SN_KERNEL_GEMM && i < n &&
                   v[i] == &u->gemm.b))
            continue;
        if (!sn_cpu_buffer_host((cpu_buf *)b)) {
            sn_cpu_task_failed(cd, "no memory to restore a packed "
                                   "weight's bytes");
            return 0;
        }
    }
    return 1;
}

/* Drops the packed copies of buf's contents (every one where buf is NULL). */
void sn_cpu_drop_packed(cpu_device *cd, const sn_buffer *buf)
{
    packed_entry **pe, *e;
    pthread_mutex_lock(&cd->pack_lock);
    for (pe = &cd->packs; (e = *pe);) {
        if (!buf || e->buf == buf) {
            *pe = e->next;
            sn_cpu_packed_b_free(e->pb);
            free(e);
        } else {
            pe = &e->next;
        }
    }
    pthread_mutex_unlock(&cd->pack_lock);
}

void sn_cpu_run_task(cpu_device *cd, const task *t)
{
    const sn_cpu_packed_b *pb;

    if (!buffers_ready(cd, t, 1))
        return;
    switch (t->kind) {
    case SN_KERNEL_GEMM:
        /* One row by a weight: read in place (B^T: dot products; B not
         * transposed and not packed yet: the packed kernel's bits), so a
         * batch-1 model makes no copy. */
        if (sn_cpu_sgemm_avx512_dot_takes(&t->u.gemm) ||
            (sn_cpu_sgemm_avx512_rows_takes(&t->u.gemm) &&
             !packed_b(cd, &t->u.gemm, 1))) {
            if (!buffers_ready(cd, t, 0))
                return;
            if ((t->u.gemm.trans_b ? sn_cpu_sgemm_avx512_dot
                                   : sn_cpu_sgemm_avx512_rows)(
                    &t->u.gemm, view_ptr(t->u.gemm.a), view_ptr(t->u.gemm.b),
                    view_ptr(t->u.gemm.c), view_ptr_or_null(t->u.gemm.bias),
                    view_ptr_or_null(t->u.gemm.res)))
                break;
        }
        if ((pb = packed_b(cd, &t->u.gemm, 0))) {
            sn_cpu_sgemm_avx512_packed(&t->u.gemm, view_ptr(t->u.gemm.a), pb,
                                       view_ptr(t->u.gemm.c),
                                       view_ptr_or_null(t->u.gemm.bias),
                                       view_ptr_or_null(t->u.gemm.res));
            break;
        }
        if (!buffers_ready(cd, t, 0))
            return;
        sn_cpu_gemm(&t->u.gemm, view_ptr(t->u.gemm.a), view_ptr(t->u.gemm.b),
                    view_ptr(t->u.gemm.c), view_ptr_or_null(t->u.gemm.bias),
                    view_ptr_or_null(t->u.gemm.res));
        break;
    case SN_KERNEL_BINARY:
        sn_cpu_binary(&t->u.binary, view_ptr(t->u.binary.a),
                      view_ptr(t->u.binary.b), view_ptr(t->u.binary.c));
        break;
    case SN_KERNEL_UNARY:
        sn_cpu_unary(&t->u.unary, view_ptr(t->u.unary.x),
                     view_ptr(t->u.unary.y));
        break;
    case SN_KERNEL_SOFTMAX:
        sn_cpu_softmax(&t->u.softmax, view_ptr(t->u.softmax.x),
                       view_ptr(t->u.softmax.y));
        break;
    case SN_KERNEL_REDUCE:
        sn_cpu_reduce(&t->u.reduce, view_ptr(t->u.reduce.x),
                      view_ptr(t->u.reduce.y));
        break;
    case SN_KERNEL_WHERE:
        sn_cpu_where(&t->u.where, view_ptr(t->u.where.cond),
                     view_ptr(t->u.where.x), view_ptr(t->u.where.y),
                     view_ptr(t->u.where.out));
        break;
    case SN_KERNEL_COPY:
        sn_cpu_copy(&t->u.copy, view_ptr(t->u.copy.src),
                    view_ptr(t->u.copy.dst));
        break;
    case SN_KERNEL_IM2COL:
        sn_cpu_im2col(&t->u.im2col, view_ptr(t->u.im2col.src),
                      view_ptr(t->u.im2col.dst));
        break;
    case SN_KERNEL_POOL:
        sn_cpu_pool(&t->u.pool, view_ptr(t->u.pool.src),
                    view_ptr(t->u.pool.dst));
        break;
    case SN_KERNEL_LAYERNORM:
        sn_cpu_layernorm(&t->u.layernorm, view_ptr(t->u.layernorm.x),
                         view_ptr(t->u.layernorm.scale),
                         view_ptr_or_null(t->u.layernorm.bias),
                         view_ptr(t->u.layernorm.y));
        break;
    case SN_KERNEL_GATHER:
        sn_cpu_gather(&t->u.gather, view_ptr(t->u.gather.data),
                      index_ptr(t->u.gather.indices),
                      view_ptr(t->u.gather.out));
        break;
    case SN_KERNEL_SCAN:
        sn_cpu_scan(&t->u.scan, view_ptr(t->u.scan.x), view_ptr(t->u.scan.y));
        break;
    case SN_KERNEL_TOPK:
        sn_cpu_topk(&t->u.topk, view_ptr(t->u.topk.x),
                    t->u.topk.values.buf ? view_ptr(t->u.topk.values)
                                         : NULL,
                    view_ptr(t->u.topk.indices));
        break;
    case SN_KERNEL_RNN_CELL:
        sn_cpu_rnn_cell(&t->u.rnn_cell, view_ptr(t->u.rnn_cell.gates),
                        view_ptr_or_null(t->u.rnn_cell.rec),
                        view_ptr_or_null(t->u.rnn_cell.peep),
                        view_ptr_or_null(t->u.rnn_cell.mask),
                        view_ptr(t->u.rnn_cell.h),
                        t->u.rnn_cell.c.buf ? view_ptr(t->u.rnn_cell.c) : NULL,
                        t->u.rnn_cell.y.buf ? view_ptr(t->u.rnn_cell.y)
                                            : NULL);
        break;
    case SN_KERNEL_RESAMPLE:
        sn_cpu_resample(&t->u.resample, view_ptr(t->u.resample.x),
                        view_ptr(t->u.resample.table),
                        view_ptr(t->u.resample.y));
        break;
    case SN_KERNEL_GRID_SAMPLE:
        sn_cpu_grid_sample(&t->u.grid_sample, view_ptr(t->u.grid_sample.x),
                           view_ptr(t->u.grid_sample.grid),
                           view_ptr(t->u.grid_sample.y));
        break;
    case SN_KERNEL_ROI_ALIGN:
        sn_cpu_roi_align(&t->u.roi_align, view_ptr(t->u.roi_align.x),
                         view_ptr(t->u.roi_align.rois),
                         view_ptr(t->u.roi_align.batch_idx),
                         view_ptr(t->u.roi_align.y));
        break;
    case SN_KERNEL_QGEMM:
        if (!sn_cpu_qgemm(&t->u.qgemm, view_ptr(t->u.qgemm.a),
                          view_ptr(t->u.qgemm.q), view_ptr(t->u.qgemm.scale),
                          view_ptr_or_null(t->u.qgemm.zero),
                          view_ptr_or_null(t->u.qgemm.bias),
                          view_ptr(t->u.qgemm.c)))
            sn_cpu_task_failed(cd, "no memory for a quantized product's "
                                   "sums");
        break;
    case SN_KERNEL_DWCONV:
        sn_cpu_dwconv(&t->u.dwconv, view_ptr(t->u.dwconv.src),
                      view_ptr(t->u.dwconv.weights),
                      view_ptr_or_null(t->u.dwconv.bias),
                      view_ptr(t->u.dwconv.dst));
        break;
    case TASK_WRITE:
        memcpy(copy_ptr(&t->host), t->host.src, t->host.bytes);
        break;
    case TASK_READ:
        memcpy(t->host.dst, copy_ptr(&t->host), t->host.bytes);
        break;
    case TASK_RELEASE_TEAM: /* the worker's own (sn_cpu_worker_main) */
        break;
    }
}
