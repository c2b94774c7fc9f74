"""The one thing pyproject.toml cannot say: the optional C kernel of the event decoder.

distcore.tfrecord._kernel is built with the system's C compiler and Python's headers; where
either is missing the build of it fails quietly (optional=True) and the decoder runs on numpy
(distcore/tfrecord/kernel.py), with the same results.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "distcore.tfrecord._kernel",
            ["shared/distcore/tfrecord/_kernel.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        )
    ]
)
