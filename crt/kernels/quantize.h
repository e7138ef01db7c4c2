/* quantize.h - (kernels being written) */
#ifndef KILN_QUANTIZE_H
#define KILN_QUANTIZE_H

#include "kiln_types.h"

#endif /* KILN_QUANTIZE_H */
