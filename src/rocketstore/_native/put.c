/* The put path's loops (see native.h). */
#include "native.h"

PyMethodDef rs_put_methods[] = {
    {NULL, NULL, 0, NULL},
};
