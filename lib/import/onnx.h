/*
 * ONNX import (private): a model file, or bytes in memory, becomes an
 * sn_graph (lib/ir/graph.h); the files it was read from are remembered so
 * that a change under a mapped model is caught before it is used.
 */
#ifndef SN_IMPORT_ONNX_H
#define SN_IMPORT_ONNX_H

#include <stddef.h>

#include "ir/graph.h"

/*
 * Import an ONNX model (lib/import/onnx.c).  The file is memory-mapped; external
 * data files are resolved relative to the model's folder and mapped too.
 * Every length, index and dimension read is checked; a malformed file gives
 * SHARDNET_INVALID_ARGUMENT (or IO_ERROR) with a message naming the place
 * (node name and op where there is one) and the reason.
 */
shardnet_status sn_onnx_load(const char *path, sn_graph **out);

/*
 * The same from memory (the fuzz target, tests).  `data` must outlive the
 * graph.  External data is refused when base_dir is NULL.
 */
shardnet_status sn_onnx_load_memory(const void *data, size_t len,
                                    const char *base_dir, sn_graph **out);

/*
 * A file a model was read from, as it was when read: the checks of
 * sn_model_files_check() compare it with what the path holds now.
 */
typedef struct sn_model_file {
    char *path;    /* the real path (symbolic links resolved) */
    unsigned long long dev, ino;
    long long size, mtime_s, mtime_ns;
} sn_model_file;

/*
 * sn_onnx_load() with the choice of copying: copy = 0 maps the files (and
 * gives back the files mapped in *files, *nfiles, for
 * sn_model_files_check()); copy = 1 reads them into memory of the model's
 * own (*files = NULL: nothing on disk matters any more).
 */
shardnet_status sn_onnx_load_file(const char *path, int copy, sn_graph **out,
                                  sn_model_file **files, size_t *nfiles);
/* SHARDNET_IO_ERROR naming the first file that changed since it was read. */
shardnet_status sn_model_files_check(const sn_model_file *files, size_t n);
void sn_model_files_free(sn_model_file *files, size_t n);

#endif /* SN_IMPORT_ONNX_H */
