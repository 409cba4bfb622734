# The level in use, for the kernels that have vector code (see _levels.h). They read it
# through the address, taken once at their import, so that choosing a kernel per call
# costs one load and no call.

cdef const int* level_in_use() noexcept nogil
