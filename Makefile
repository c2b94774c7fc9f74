# The README's two commands are `make demo` and `make test`; both build .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Test processes: whole files go to each (--dist loadfile), since some share a module's server,
# heaviest first as tests/durations.json knows them (tests/kit/order.py; `make durations`
# measures them again).
# Three on 2 cores: the slowest tests mostly wait (for Slurm, sshd, a job's subprocesses), so a
# third process keeps both cores busy. The 20 slowest tests are listed at the end: the suite
# must stay under 15 minutes on 2 cores.
WORKERS ?= 3
STAMP  := $(VENV)/.installed
DIST_FILES := --dist loadfile --no-loadscope-reorder

.PHONY: demo test lint typecheck pytest durations hunt bench wheel clean

# Reinstall only when the project's metadata changed (the code itself is installed editable),
# or a source of the decoder's C kernel did (pip builds it in place; see setup.py).
$(STAMP): pyproject.toml setup.py $(wildcard shared/distcore/tfrecord/_kernel*.[ch])
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[agent,test,bench]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m distmon.demo

test: $(STAMP)
	$(BIN)/ruff check shared agent tui tests bench examples
	$(BIN)/lint-imports
	$(BIN)/mypy shared agent tui bench tests examples
	$(BIN)/pytest tests -n $(WORKERS) $(DIST_FILES) --durations=20

# ruff, then the import contracts of pyproject.toml ([tool.importlinter]).
lint: $(STAMP)
	$(BIN)/ruff check shared agent tui tests bench examples
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy shared agent tui bench tests examples

pytest: $(STAMP)
	$(BIN)/pytest tests -n $(WORKERS) $(DIST_FILES) $(ARGS)

# Each test file's seconds in a whole run, into tests/durations.json: the order make test runs
# the files in.
durations: $(STAMP)
	DISTMON_RECORD_DURATIONS=tests/durations.json $(BIN)/pytest tests -n $(WORKERS) $(DIST_FILES) $(ARGS)

# Fresh random examples for every property test (1,000 where a test does not set its own
# count): looks for inputs that `make test`'s fixed, reproducible examples have not tried.
hunt: $(STAMP)
	DISTMON_HYPOTHESIS=hunt $(BIN)/pytest $$(grep -rl "@given" tests) $(ARGS)

# Every benchmark in bench/; the modules they share are named with a leading underscore
# (bench/_installed.py) and are not run.
bench: $(STAMP)
	@for script in bench/[!_]*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

# The wheel, into $(DIST): the decoder's C kernel compiled in where a C compiler ($(CC)) and this
# Python's headers are found (DISTMON_REQUIRE_KERNEL: a kernel that fails to build fails the
# wheel); else a pure-Python wheel, said so (its decoder runs the reference path: the same
# results, more CPU). Needs pip and its package index (for the build's setuptools), not .venv.
DIST ?= dist
wheel:
	@rm -rf build  # (a build left there would lend its files, the kernel's too, to this wheel)
	@if command -v $(CC) >/dev/null 2>&1 && test -f "$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h"; then \
		echo "wheel: with the decoder's C kernel ($(CC))"; \
		CC="$(CC)" DISTMON_REQUIRE_KERNEL=1 $(PYTHON) -m pip wheel -q --no-deps -w $(DIST) . ; \
	else \
		echo "wheel: no C compiler ($(CC)) or no Python headers here: a pure-Python wheel, whose decoder runs the reference path (same results, more CPU)"; \
		DISTMON_NO_KERNEL=1 $(PYTHON) -m pip wheel -q --no-deps -w $(DIST) . ; \
	fi
	@ls $(DIST)/distmon-*.whl

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
	rm -f shared/distcore/tfrecord/_kernel*.so  # (an older build's name would shadow a newer)
