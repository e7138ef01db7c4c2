/* kiln_kernels.h - every kernel of kiln's C runtime, one header per op family. */
#ifndef KILN_KERNELS_H
#define KILN_KERNELS_H

#include "kiln_types.h"
#include "conv.h"
#include "kernels_mve.h"
#include "pool.h"
#include "elementwise.h"
#include "activation.h"
#include "quantize.h"
#include "reduce.h"
#include "data_movement.h"
#include "indexing.h"
#include "math_ops.h"
#include "inplace.h"
#include "svdf.h"
#include "lstm.h"
#include "resize.h"

#endif /* KILN_KERNELS_H */
