/* The public option structs that can grow (shardnet_session_options,
 * shardnet_context_options): each leads with its size, and one reader
 * applies the same rules to all (see include/shardnet.h). */
#include <config.h>

#include <string.h>

#include "api/api_impl.h"
#include "core/error.h"

shardnet_status sn_options_read(const void *in, void *out, size_t first,
                                size_t known, const char *what)
{
    size_t size, stated;
    memset(out, 0, known);
    if (!in)
        return SHARDNET_OK;
    memcpy(&stated, in, sizeof stated);
    size = stated ? stated : first;
    if (size < first)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s options: size %zu is too small (set it to "
                        "sizeof(shardnet_%s_options))",
                        what, stated, what);
    for (size_t i = known; i < size; i++)
        if (((const unsigned char *)in)[i])
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "%s options: byte %zu is set, past the %zu this "
                            "library knows (an option of a newer shardnet)",
                            what, i, known);
    memcpy(out, in, size < known ? size : known);
    return SHARDNET_OK;
}
