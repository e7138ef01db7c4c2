/* data_movement.h - (kernels being written) */
#ifndef KILN_DATA_MOVEMENT_H
#define KILN_DATA_MOVEMENT_H

#include "kiln_types.h"

#endif /* KILN_DATA_MOVEMENT_H */
