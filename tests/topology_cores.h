/* For suites that need a package of several cores (tests that cut one or
 * bind a split's threads inside one): whether the topology the
 * environment gives (hwloc, simulated or not) has two cores or more in
 * its first package. */
#ifndef SN_TEST_TOPOLOGY_CORES_H
#define SN_TEST_TOPOLOGY_CORES_H

#include <hwloc.h>

static int first_package_has_cores(void)
{
    hwloc_topology_t t;
    hwloc_obj_t pkg;
    int n = 0;
    if (hwloc_topology_init(&t) < 0)
        return 0;
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_NONE);
    if (hwloc_topology_load(t) == 0) {
        pkg = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, 0);
        if (!pkg)
            pkg = hwloc_get_root_obj(t);
        n = hwloc_get_nbobjs_inside_cpuset_by_type(t, pkg->cpuset,
                                                   HWLOC_OBJ_CORE);
    }
    hwloc_topology_destroy(t);
    return n >= 2;
}

#endif
