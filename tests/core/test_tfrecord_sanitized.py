"""The kernel's builds: against the stable ABI its wheel is tagged with, and with sanitizers.

The kernel's differential tests (test_tfrecord_kernel.py, test_tfrecord_hparams.py) again, on
a build of the kernel with AddressSanitizer and UndefinedBehaviorSanitizer: a read past a
buffer, a use after free, an overflow or a misaligned load fails them instead of passing
unseen. Skipped, with the reason, where gcc, Python's headers or the sanitizers are missing.

Python is not built with ASan, so its runtime comes first through LD_PRELOAD; PYTHONMALLOC=malloc
gives every buffer the kernel reads ASan's red zones (pymalloc's pools would hide an overrun);
leaks are not asked about (the interpreter keeps memory until exit by design).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "shared" / "distcore" / "tfrecord"
DIFFERENTIAL = ["tests/core/test_tfrecord_kernel.py", "tests/core/test_tfrecord_hparams.py"]
FLAGS = ["-shared", "-fPIC", "-O1", "-g", "-std=c11", "-fno-omit-frame-pointer",
         "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]  # fmt: skip


def _sanitized_kernel(out: Path) -> Path:
    """The kernel built with the sanitizers into `out`, or a skip saying what is missing."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no gcc: the sanitized build needs it")
    headers = Path(sysconfig.get_paths()["include"])
    if not (headers / "Python.h").is_file():
        pytest.skip(f"no Python.h in {headers} (Debian: python3-dev)")
    module = out / f"_kernel{sysconfig.get_config_var('EXT_SUFFIX')}"
    sources = sorted(str(p) for p in KERNEL.glob("_kernel*.c"))
    built = subprocess.run([gcc, *FLAGS, f"-I{headers}", *sources, "-o", str(module)],
                           capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    if built.returncode != 0:
        if "sanitize" in built.stderr or "asan" in built.stderr:
            pytest.skip(f"gcc has no AddressSanitizer/UBSan here: {built.stderr.strip()[-300:]}")
        pytest.fail(f"the kernel did not build with the sanitizers:\n{built.stderr}")
    return module


def _libasan(gcc: str) -> str:
    found = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True,
                           text=True, check=False).stdout.strip()  # fmt: skip
    if not os.path.isabs(found) or not os.path.exists(found):
        pytest.skip("gcc's ASan runtime (libasan.so) is not installed")
    return found


@pytest.mark.slow
def test_the_differential_tests_pass_on_a_sanitized_kernel(tmp_path: Path) -> None:
    """~30 s under load: the differential tests' own hypothesis examples, on the sanitized
    build (the one check that the kernel never reads or writes where it must not)."""
    module = _sanitized_kernel(tmp_path)
    env = {
        **os.environ,
        "DISTMON_TEST_KERNEL": str(module),  # tests/core/conftest.py loads it as the kernel
        "LD_PRELOAD": _libasan(shutil.which("gcc") or "gcc"),
        "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:abort_on_error=0",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
        "PYTHONMALLOC": "malloc",
    }
    env.pop("DISTMON_PURE", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *DIFFERENTIAL],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False,
    )
    report = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, report
    assert " passed" in done.stdout, report


def test_the_kernel_uses_only_the_stable_abi() -> None:
    """The wheel is cp311-abi3 (setup.py): every source compiles with Py_LIMITED_API at 3.11,
    no call outside it (a macro such as PyList_SET_ITEM is an implicit declaration there)."""
    gcc = shutil.which("gcc")
    headers = Path(sysconfig.get_paths()["include"])
    if gcc is None or not (headers / "Python.h").is_file():
        pytest.skip("needs gcc and Python.h")
    setup = (ROOT / "setup.py").read_text()
    assert 'LIMITED_API = "0x030B0000"' in setup and "py_limited_api=True" in setup
    sources = sorted(str(p) for p in KERNEL.glob("_kernel*.c"))
    done = subprocess.run(
        [gcc, "-fsyntax-only", "-std=c11", "-Werror=implicit-function-declaration",
         "-DPy_LIMITED_API=0x030B0000", f"-I{headers}", *sources],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
