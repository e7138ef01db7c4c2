/* elementwise.h - (kernels being written) */
#ifndef KILN_ELEMENTWISE_H
#define KILN_ELEMENTWISE_H

#include "kiln_types.h"

#endif /* KILN_ELEMENTWISE_H */
