/* The module object: the method tables of common.c, put.c, put_batchcq.c, scan.c, read/, arrow.c, index.c,
 * props.c, remoting.c, meter.c and fastsend.c under one name, lane.c's PutLane type, verify.c's VerifyRecords and meter.c's Counts. */
#include "native.h"
#include "read/read.h"

PyObject *rs_CorruptDataError = NULL;

#ifndef RS_SOURCE_HASH
#define RS_SOURCE_HASH ""   /* built without setup.py: engine.py cannot tell, and trusts it */
#endif

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "rocketstore._native",
    "rocketstore's per-message loops in C (the pure Python modules are the reference).", -1, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m = PyModule_Create(&native_module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddFunctions(m, rs_common_methods) < 0 || PyModule_AddFunctions(m, rs_put_methods) < 0
            || PyModule_AddFunctions(m, rs_scan_methods) < 0 || PyModule_AddFunctions(m, rs_message_methods) < 0
            || PyModule_AddFunctions(m, rs_get_methods) < 0 || PyModule_AddFunctions(m, rs_query_methods) < 0
            || PyModule_AddFunctions(m, rs_by_time_methods) < 0
            || PyModule_AddFunctions(m, rs_arrow_methods) < 0
            || PyModule_AddFunctions(m, rs_index_methods) < 0 || PyModule_AddFunctions(m, rs_props_methods) < 0
            || PyModule_AddFunctions(m, rs_batchcq_methods) < 0 || PyModule_AddFunctions(m, rs_remoting_methods) < 0
            || PyModule_AddFunctions(m, rs_meter_methods) < 0 || rs_meter_init(m) < 0
            || PyModule_AddFunctions(m, rs_fastsend_methods) < 0 || rs_fastsend_init(m) < 0
            || rs_scan_init() < 0 || rs_verify_init(m) < 0 || rs_message_init() < 0 || rs_mapped_init() < 0
            || rs_query_init() < 0 || rs_lane_init(m) < 0
            || PyModule_AddStringConstant(m, "SOURCE_HASH", RS_SOURCE_HASH) < 0)
        goto fail;
    PyObject *errors = PyImport_ImportModule("rocketstore.errors");
    if (errors == NULL)
        goto fail;
    rs_CorruptDataError = PyObject_GetAttrString(errors, "CorruptDataError");
    Py_DECREF(errors);
    if (rs_CorruptDataError == NULL)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
