/* reduce.h - (kernels being written) */
#ifndef KILN_REDUCE_H
#define KILN_REDUCE_H

#include "kiln_types.h"

#endif /* KILN_REDUCE_H */
