/* pool.h - (kernels being written) */
#ifndef KILN_POOL_H
#define KILN_POOL_H

#include "kiln_types.h"

#endif /* KILN_POOL_H */
