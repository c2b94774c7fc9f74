"""Small models and datasets for `sample_configs/`: each shows one kind of job distagent trains
from the user's own model and data (`[model] name` and `[data.python] factory`)."""
