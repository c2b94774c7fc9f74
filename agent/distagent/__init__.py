"""distagent: runs TensorFlow MirroredStrategy and MultiWorkerMirroredStrategy training jobs."""

from distcore import __version__

__all__ = ["__version__"]
