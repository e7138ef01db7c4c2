/* activation.h - (kernels being written) */
#ifndef KILN_ACTIVATION_H
#define KILN_ACTIVATION_H

#include "kiln_types.h"

#endif /* KILN_ACTIVATION_H */
