/* The scan path's loops (see native.h). */
#include "native.h"

PyMethodDef rs_scan_methods[] = {
    {NULL, NULL, 0, NULL},
};
