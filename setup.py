"""The one thing pyproject.toml cannot say: the optional C kernel of the event decoder.

distcore.tfrecord._kernel is built with the system's C compiler and Python's headers; where
either is missing the build of it fails quietly (optional) and the decoder runs its reference
path in plain Python (distcore/tfrecord/kernel.py), with the same results, and says so.
DISTMON_REQUIRE_KERNEL=1 makes a failed build an error (wheels, CI); DISTMON_NO_KERNEL=1 leaves
it out altogether, for a pure-Python wheel (py3-none-any: `make wheel` where no compiler is). Its sources are one file
per purpose (listed in _kernel.c) sharing the private header _kernel.h: every .c is compiled
into the one module, and the header is a dependency (a change to it rebuilds them; the sdist
carries it).
"""

import os

from setuptools import Extension, setup

KERNEL = "shared/distcore/tfrecord/"
# The kernel uses only the stable ABI of Python 3.11 (the buffer protocol joined it there): one
# wheel per platform serves every CPython from 3.11 on (cp311-abi3).
LIMITED_API = "0x030B0000"
# Listed, not globbed: the build and the sdist get exactly these, whatever lies beside them.
SOURCES = ["_kernel.c", "_kernel_crc.c", "_kernel_framing.c", "_kernel_scalars.c",
           "_kernel_columns.c", "_kernel_hparams.c"]  # fmt: skip

KERNEL_MODULE = Extension(
    "distcore.tfrecord._kernel",
    [KERNEL + name for name in SOURCES],
    depends=[KERNEL + "_kernel.h"],
    extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
    define_macros=[("Py_LIMITED_API", LIMITED_API)],
    py_limited_api=True,
    optional=not os.environ.get("DISTMON_REQUIRE_KERNEL"),
)

if os.environ.get("DISTMON_NO_KERNEL"):
    setup()
else:
    setup(ext_modules=[KERNEL_MODULE], options={"bdist_wheel": {"py_limited_api": "cp311"}})
