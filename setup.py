"""The one thing pyproject.toml cannot say: the optional C kernel of the event decoder.

distcore.tfrecord._kernel is built with the system's C compiler and Python's headers; where
either is missing the build of it fails quietly (optional=True) and the decoder runs its
reference path in plain Python (distcore/tfrecord/kernel.py), with the same results. Its sources are one file per purpose
(listed in _kernel.c) sharing the private header _kernel.h: every .c is compiled into the one
module, and the header is a dependency (a change to it rebuilds them; the sdist carries it).
"""

from setuptools import Extension, setup

KERNEL = "shared/distcore/tfrecord/"
# Listed, not globbed: the build and the sdist get exactly these, whatever lies beside them.
SOURCES = ["_kernel.c", "_kernel_crc.c", "_kernel_framing.c", "_kernel_scalars.c",
           "_kernel_columns.c", "_kernel_hparams.c"]  # fmt: skip

setup(
    ext_modules=[
        Extension(
            "distcore.tfrecord._kernel",
            [KERNEL + name for name in SOURCES],
            depends=[KERNEL + "_kernel.h"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        )
    ]
)
