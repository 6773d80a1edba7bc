/*
 * NonMaxSuppression (opsets 10 and 11): for every batch and class, the
 * boxes by decreasing score (above score_threshold), each kept unless it
 * overlaps a kept one by an intersection over union above iou_threshold,
 * at most max_output_boxes_per_class of them; the output lists (batch,
 * class, box) of each kept box, int64.
 *
 * How many boxes are kept depends on the scores' values, and the output's
 * shape must be known when the plan is built: the operator runs on the
 * host, when its boxes and scores are known then (constants, or graph
 * inputs small enough to be bound by value).  Boxes or scores computed on
 * the device are refused with that reason: reading them back in the
 * middle of a run is not something a plan does.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>

#include "ops/ops.h"

/* A box as its corners, y1 <= y2 and x1 <= x2. */
typedef struct corners {
    double y1, x1, y2, x2;
} corners;

static corners box_at(const sn_rt *b, size_t i, int center)
{
    double v[4];
    corners c;
    for (size_t k = 0; k < 4; k++)
        v[k] = sn_rt_get_double(b, i * 4 + k);
    if (center) { /* (x_center, y_center, width, height) */
        c.x1 = v[0] - v[2] / 2;
        c.x2 = v[0] + v[2] / 2;
        c.y1 = v[1] - v[3] / 2;
        c.y2 = v[1] + v[3] / 2;
    } else { /* two opposite corners (y, x), in either order */
        c.y1 = fmin(v[0], v[2]);
        c.y2 = fmax(v[0], v[2]);
        c.x1 = fmin(v[1], v[3]);
        c.x2 = fmax(v[1], v[3]);
    }
    return c;
}

static double iou(corners a, corners b)
{
    double ih = fmin(a.y2, b.y2) - fmax(a.y1, b.y1);
    double iw = fmin(a.x2, b.x2) - fmax(a.x1, b.x1);
    double inter, uni;
    if (ih <= 0 || iw <= 0)
        return 0.0;
    inter = ih * iw;
    uni = (a.y2 - a.y1) * (a.x2 - a.x1) + (b.y2 - b.y1) * (b.x2 - b.x1) -
          inter;
    return uni > 0 ? inter / uni : 0.0;
}

/* Scores of one class, for qsort: by score, highest first, then by box. */
typedef struct cand {
    double score;
    int64_t box;
} cand;

static int by_score(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return (a->box > b->box) - (a->box < b->box);
}

/* The optional scalar input i as a double (dflt when omitted). */
static shardnet_status scalar_in(sn_lower *L, const sn_node *n, size_t i,
                                 const char *what, double dflt, double *v)
{
    sn_rt *rt = sn_in(L, n, i);
    *v = dflt;
    if (!rt || sn_rt_elements(rt) == 0)
        return SHARDNET_OK;
    if (sn_rt_elements(rt) != 1 || !rt->host)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "%s must be one value known when the model is "
                             "planned",
                             what);
    *v = sn_dtype_is_integer(rt->dtype) ? (double)sn_rt_get_int(rt, 0)
                                        : sn_rt_get_double(rt, 0);
    return SHARDNET_OK;
}

/* The kept boxes of batch b, class c, appended to out (triples). */
static size_t suppress(const sn_rt *boxes, const sn_rt *scores, size_t b,
                       size_t c, size_t nc, size_t nb, int center,
                       double maxout, double iou_th, double score_th,
                       cand *cs, corners *kept, int64_t *out)
{
    size_t ncand = 0, nkept = 0;
    for (size_t i = 0; i < nb; i++) {
        double s = sn_rt_get_double(scores, (b * nc + c) * nb + i);
        if (s > score_th)
            cs[ncand++] = (cand){s, (int64_t)i};
    }
    qsort(cs, ncand, sizeof *cs, by_score);
    for (size_t k = 0; k < ncand && (double)nkept < maxout; k++) {
        corners bx = box_at(boxes, b * nb + (size_t)cs[k].box, center);
        int keep = 1;
        for (size_t j = 0; j < nkept && keep; j++)
            keep = !(iou(bx, kept[j]) > iou_th);
        if (!keep)
            continue;
        out[nkept * 3] = (int64_t)b;
        out[nkept * 3 + 1] = (int64_t)c;
        out[nkept * 3 + 2] = cs[k].box;
        kept[nkept++] = bx;
    }
    return nkept;
}

SN_LOWER(sn_lower_nms)
{
    sn_rt *boxes = sn_in(L, n, 0), *scores = sn_in(L, n, 1);
    int center = sn_attr_int(n, "center_point_box", 0) != 0;
    double maxout, iou_th, score_th;
    size_t nbatch, nc, nb, total = 0;
    int64_t *out, dims[2];
    cand *cs;
    corners *kept;
    shardnet_status st;

    if (boxes->rank != 3 || boxes->dims[2] != 4 || scores->rank != 3 ||
        scores->dims[0] != boxes->dims[0] ||
        scores->dims[2] != boxes->dims[1])
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "boxes must be (batches, boxes, 4) and scores "
                             "(batches, classes, boxes)");
    if ((st = scalar_in(L, n, 2, "max_output_boxes_per_class", 0, &maxout)) ||
        (st = scalar_in(L, n, 3, "iou_threshold", 0, &iou_th)) ||
        (st = scalar_in(L, n, 4, "score_threshold", -INFINITY, &score_th)))
        return st;
    if (!sn_host_known(boxes) || !sn_host_known(scores))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "the boxes and scores must be known when the "
                             "model is planned (constants or small graph "
                             "inputs): the number of boxes kept depends on "
                             "their values, and ones computed on the device "
                             "are not read back during a run");
    nbatch = (size_t)boxes->dims[0];
    nb = (size_t)boxes->dims[1];
    nc = (size_t)scores->dims[1];
    if (maxout < 0)
        maxout = 0;
    out = sn_host_alloc(nbatch * nc * (nb < maxout ? nb : (size_t)maxout),
                        3 * sizeof *out);
    cs = malloc((nb ? nb : 1) * sizeof *cs);
    kept = malloc((nb ? nb : 1) * sizeof *kept);
    if (!out || !cs || !kept) {
        free(out);
        free(cs);
        free(kept);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "non-max suppression");
    }
    for (size_t b = 0; b < nbatch && maxout >= 1; b++)
        for (size_t c = 0; c < nc; c++)
            total += suppress(boxes, scores, b, c, nc, nb, center, maxout,
                              iou_th, score_th, cs, kept, out + total * 3);
    free(cs);
    free(kept);
    dims[0] = (int64_t)total;
    dims[1] = 3;
    return sn_out_host(L, n, 0, SN_DT_INT64, 2, dims, out);
}
