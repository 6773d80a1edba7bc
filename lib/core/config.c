/* The SHARDNET_* environment variables, read once into the process's
 * configuration: one table row per variable, one parser per kind of
 * value (see config.h). */
#include <config.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "core/trace.h"

/* What a variable's text becomes. */
typedef enum kind {
    SIZE,   /* uint64_t bytes: a positive number, with a K, M or G suffix
               (binary units) or none */
    COUNT,  /* unsigned: a whole number, 1 to 1 << 20 */
    NUMBER, /* double: a positive number, times the row's scale */
    CHOICE, /* int: the index of the value among the row's words (a flag's
               are "0" and "1") */
    TEXT    /* char[cap]: any text that fits */
} kind;

typedef struct setting {
    const char *name;
    kind kind;
    size_t offset;            /* of the field in sn_config */
    size_t cap;               /* TEXT: the field's bytes */
    double scale;             /* NUMBER: the field's unit per the text's */
    const char *const *words; /* CHOICE: NULL-terminated */
    const char *should;       /* what the value should be, for the error */
} setting;

static const char *const flag[] = {"0", "1", NULL};
static const char *const sgemm[] = {"auto", "blas", NULL};
/* In lib/comm/codec.h's order. */
static const char *const codecs[] = {"fp32", "fp16", "bf16", "int8", NULL};

#define AT(field) offsetof(sn_config, field)
#define CAP(field) sizeof(((sn_config *)0)->field)

/* In the order their errors are reported: the first bad value is the
 * error. */
static const setting settings[] = {
    {.name = "SHARDNET_MEMORY_LIMIT", .kind = SIZE, .offset = AT(memory_limit),
     .should = "a size (a positive number of bytes, or one with a K, M or G "
               "suffix, e.g. 512M)"},
    {.name = "SHARDNET_CPU_THREADS", .kind = COUNT, .offset = AT(cpu_threads),
     .should = "a number of threads (a whole number, 1 or more)"},
    {.name = "SHARDNET_DEVICES", .kind = TEXT, .offset = AT(devices),
     .cap = CAP(devices), .should = "a device list of at most 1023 bytes"},
    {.name = "SHARDNET_REPROFILE", .kind = CHOICE, .offset = AT(reprofile),
     .words = flag, .should = "a switch (0 or 1)"},
    {.name = "SHARDNET_STAGED_COLLECTIVES", .kind = CHOICE,
     .offset = AT(staged_collectives), .words = flag,
     .should = "a switch (0 or 1)"},
    {.name = "SHARDNET_TENSOR_RULES", .kind = CHOICE,
     .offset = AT(tensor_rules), .words = flag,
     .should = "a switch (0 or 1)"},
    {.name = "SHARDNET_CL_DIR", .kind = TEXT, .offset = AT(kernel_dir),
     .cap = CAP(kernel_dir), .should = "a folder's path of at most 4095 bytes"},
    {.name = "SHARDNET_CACHE_DIR", .kind = TEXT, .offset = AT(cache_dir),
     .cap = CAP(cache_dir), .should = "a folder's path of at most 4095 bytes"},
    {.name = "SHARDNET_COMM", .kind = CHOICE, .offset = AT(comm),
     .words = codecs, .should = "a codec (fp32, fp16, bf16 or int8)"},
    {.name = "SHARDNET_MPI", .kind = CHOICE, .offset = AT(mpi), .words = flag,
     .should = "a switch (0 or 1)"},
    {.name = "SHARDNET_MPI_TIMEOUT", .kind = NUMBER,
     .offset = AT(mpi_timeout_s), .scale = 1,
     .should = "a number of seconds (a positive number, e.g. 30 or 2.5)"},
    {.name = "SHARDNET_LINK_LATENCY_US", .kind = NUMBER,
     .offset = AT(link_latency_s), .scale = 1e-6,
     .should = "a latency in microseconds (a positive number, e.g. 20)"},
    {.name = "SHARDNET_LINK_GBPS", .kind = NUMBER,
     .offset = AT(link_bytes_per_s), .scale = 1e9,
     .should = "a bandwidth in GB/s (a positive number, e.g. 2.5)"},
    {.name = "SHARDNET_CPU_SGEMM", .kind = CHOICE, .offset = AT(sgemm_blas),
     .words = sgemm, .should = "a GEMM kernel (auto or blas)"},
    {.name = "SHARDNET_CUDA_CHECK", .kind = CHOICE, .offset = AT(cuda_check),
     .words = flag, .should = "a switch (0 or 1)"},
};

static int parse_size(const char *v, uint64_t *out)
{
    char *end;
    double x, unit = 1, bytes;
    errno = 0;
    x = strtod(v, &end);
    if (end != v && *end) {
        unit = *end == 'K' || *end == 'k'   ? 0x1p10
               : *end == 'M' || *end == 'm' ? 0x1p20
               : *end == 'G' || *end == 'g' ? 0x1p30
                                            : 0;
        end++;
    }
    bytes = x * unit;
    /* Below one byte is no size either: 0 would mean "no limit". */
    if (end == v || *end || errno || !(x > 0) || x > 1e18 || !(bytes >= 1) ||
        bytes >= 0x1p64)
        return 0;
    *out = (uint64_t)bytes;
    return 1;
}

static int parse_count(const char *v, unsigned *out)
{
    char *end;
    long n;
    errno = 0;
    n = strtol(v, &end, 10);
    if (end == v || *end || errno || n < 1 || n > 1 << 20)
        return 0;
    *out = (unsigned)n;
    return 1;
}

static int parse_number(const char *v, double scale, double *out)
{
    char *end;
    double x;
    errno = 0;
    x = strtod(v, &end);
    if (end == v || *end || errno || !(x > 0) || !isfinite(x))
        return 0;
    *out = x * scale;
    return 1;
}

static int parse_choice(const char *v, const char *const *words, int *out)
{
    for (int i = 0; words[i]; i++)
        if (!strcmp(v, words[i])) {
            *out = i;
            return 1;
        }
    return 0;
}

static int parse_text(const char *v, size_t cap, char *out)
{
    size_t len = strlen(v);
    if (len >= cap)
        return 0;
    memcpy(out, v, len + 1);
    return 1;
}

/* v into the row's field of c; 0 (c untouched) when v cannot be used. */
static int parse(const setting *s, const char *v, sn_config *c)
{
    char *field = (char *)c + s->offset;
    switch (s->kind) {
    case SIZE:
        return parse_size(v, (uint64_t *)(void *)field);
    case COUNT:
        return parse_count(v, (unsigned *)(void *)field);
    case NUMBER:
        return parse_number(v, s->scale, (double *)(void *)field);
    case CHOICE:
        return parse_choice(v, s->words, (int *)(void *)field);
    case TEXT:
        return parse_text(v, s->cap, field);
    }
    return 0;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static sn_config env;
static char bad[1024]; /* the first bad value's error, "" when none */

static void read_env(void)
{
    env.mpi = 1;
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        const char *v = getenv(settings[i].name);
        /* Set but empty is unset, as it always was. */
        if (v && *v && !parse(&settings[i], v, &env) && !bad[0])
            snprintf(bad, sizeof bad, "%s='%.256s' is not %s",
                     settings[i].name, v, settings[i].should);
    }
}

const sn_config *sn_config_env(void)
{
    pthread_once(&once, read_env);
    return &env;
}

shardnet_status sn_config_env_status(void)
{
    pthread_once(&once, read_env);
    if (bad[0])
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s", bad);
    return SHARDNET_OK;
}

const sn_config *sn_config_or_env(const sn_config *config)
{
    return config ? config : sn_config_env();
}

void sn_progress(const sn_config *c, double *stamp, int last, uint64_t done,
                 uint64_t total, const char *what, ...)
{
    if (!c || !c->progress)
        return;
    double now = sn_trace_now();
    if (!last && !(total && done >= total) && *stamp &&
        now - *stamp < 0.2)
        return;
    *stamp = now;
    char text[128];
    va_list ap;
    va_start(ap, what);
    vsnprintf(text, sizeof text, what, ap);
    va_end(ap);
    c->progress(c->progress_user, text, done, total);
}
