/*
 * The split chooser's verdict (private): which of one device, a layer, a
 * hybrid, a data or a tensor split runs a session, from their estimates, and the
 * report's last lines that tell it.  The estimates of the first three are
 * sn_split_choose's (layer_split.h); the tensor split's is its cost model's
 * (tensor_costs.h), read off a candidate split that lib/api builds and
 * hands over as plain figures.  See choose.c.
 */
#ifndef SN_CHOOSE_H
#define SN_CHOOSE_H

#include "plan/layer_split.h"

typedef enum sn_split_kind {
    SN_SPLIT_NONE,
    SN_SPLIT_LAYER,
    SN_SPLIT_TENSOR,
    SN_SPLIT_HYBRID,
    SN_SPLIT_DATA,
    SN_SPLIT_REPLICATED
} sn_split_kind;

/* A tensor split over all the devices, built to be estimated: its
 * figures, or why it could not be built. */
typedef struct sn_tensor_candidate {
    const char *not_possible; /* why not (an error message), or NULL */
    double estimate;          /* seconds per run */
    size_t ncoll;             /* collectives per run */
    double bytes;             /* the float bytes they move */
    const char *overflow;     /* the first device it does not fit, NULL */
} sn_tensor_candidate;

/*
 * The fastest of ch's estimates and the tensor candidate tc's over ndev
 * devices (tc NULL: not tried, one device; one that does not fit is not
 * chosen).  Appended to report (may be NULL; sn_split_choose's account
 * of the others already there): tc's line and the choice, with why:
 * against the fastest device alone (best_name, ch->best_dev's name), the
 * baseline every split must beat.
 */
sn_split_kind sn_split_pick(const sn_split_choice *ch,
                            const sn_tensor_candidate *tc, size_t ndev,
                            const char *best_name, char *report, size_t cap);

#endif /* SN_CHOOSE_H */
