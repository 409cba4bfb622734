"""The vector levels of the kernels (the bottom layer): which levels exist, which one runs.

`_levels.h` is the one list of levels; `_dispatch` chooses the level in use, which the
coding kernel (`stc._core`) and the built-in losses (`stc.losses`) read to pick their
own vector code. `_throughput` holds the roofline benchmark's probes.

The folders depend downwards only, cimports included: `stc._core` on `stc.losses` (the
kernel calls the loss) and on this folder, `stc.losses` on this folder, and this folder
on nothing of the package. So a loss owns its vector code without the kernel's.
"""
