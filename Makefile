# The two commands of the README: `make demo` and `make test`. Both set everything up first.
SHELL := /bin/bash
ENV := source scripts/env.sh &&

.PHONY: setup demo test test-fast lint bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	@$(ENV) captain demo

test: setup
	@$(ENV) python -m pytest $(PYTEST_ARGS)

# The quick tier: pure-Python core tests (no sim, no ROS, no e2e).
test-fast: setup
	@$(ENV) python -m pytest -m "not sim and not ros and not e2e and not slow" $(PYTEST_ARGS)

lint: setup
	@$(ENV) ruff check .

clean:
	rm -rf ros2_ws/build ros2_ws/install ros2_ws/log
