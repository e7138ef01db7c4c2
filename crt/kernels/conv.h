/* conv.h - (kernels being written) */
#ifndef KILN_CONV_H
#define KILN_CONV_H

#include "kiln_types.h"

#endif /* KILN_CONV_H */
