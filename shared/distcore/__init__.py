"""distcore: what the agent and the dashboard share.

Event-file reading, GPU/host telemetry, the metric names and the thresholds. Never imports
tensorflow or textual at module level (a test enforces it), so the dashboard starts fast on a
login node without TensorFlow.
"""

__version__ = "0.1.0"
