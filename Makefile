# Two commands do all the set-up on a fresh machine:
#   make demo   train a small relational model/agent on the embedded default and export it
#   make test   lint, build the docs strictly and run the whole test suite
# Both create .venv (Python 3.11) when it is missing or out of date: `make demo` with what the
# demo needs (the tensorflow and envs extras), `make test` with the whole pinned stack.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The demo's set-up: the same .venv with only what the demo runs on (below), unless the whole
# stack is already there.
DEMO_STAMP := $(VENV)/.installed-demo
DEMO_DIR ?= /tmp/keras_relational_demo
TORCH ?= torch==2.13.0
PYTEST_ARGS ?=

.PHONY: venv demo-venv demo test lint notebooks benchmarks clean

venv: $(STAMP)

# What the demo needs and nothing more: the layers, the environments and TensorFlow (Keras'
# default backend, which the compiled trainer runs under, and the SavedModel export); no
# TF-Agents, torch, Ray, pysc2 or pygame (docs/install.md gives the sizes). `make test` later
# installs the rest into the same .venv.
demo-venv: $(DEMO_STAMP)

$(DEMO_STAMP): setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -f $(STAMP) -a $(STAMP) -nt setup.cfg || ( \
		$(BIN)/python -m pip install --upgrade "pip>=24" && \
		$(BIN)/python -m pip install -e ".[tensorflow,envs]" )
	touch $(DEMO_STAMP)

$(STAMP): setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade "pip>=24"
	$(BIN)/python -m pip install -e ".[rl,jax,dev,distributed]"
	# TF-Agents' metadata pins cannot resolve next to tfp 0.25: install it without its deps
	# (its real runtime needs are in the `rl` extra).
	$(BIN)/python -m pip install --no-deps tf-agents==0.19.0
	# StarCraft II (docs/sc2.md): pysc2 and the five packages its environments import, without
	# the rest of its metadata (enum34 would shadow the standard library's enum wherever
	# site-packages precedes it, e.g. on PYTHONPATH; mock, deepdiff, mpyq, s2protocol and
	# dm-env-rpc serve pysc2's own tests and replays). Nothing of the stack above changes.
	$(BIN)/python -m pip install --no-deps pysc2==4.0.0 s2clientprotocol==5.0.17.98310.0 \
		portpicker==1.6.0 websocket-client==1.9.2 pygame==2.6.1 sk-video==1.1.10
	# PyTorch, for the layers' torch lane (tests/layers/test_mixed_precision.py). On the
	# project's machines pip finds the CPU build of torch 2.13.0 (192 MB) on disk; from PyPI
	# alone Linux x86_64 gets a CUDA build (several GB): set TORCH= to skip it (docs/install.md).
	test -z "$(TORCH)" || $(BIN)/python -m pip install "$(TORCH)"
	touch $(STAMP)

# The embedded default: a small relational agent on a 6x6-room BoxWorld (solution length 1, no
# distractors; a fresh level every episode), trained with V-trace by the compiled actor-learner
# loop on the CPU (one-hot observations, Adam, rewards x 0.1, 32 levels x 20 steps an update),
# then evaluation on 200 fresh levels, checkpoint and export of the Keras model.
# Its flags live in benchmarks/demo_flags.txt, which benchmarks/reproduce_demo.py (the demo's
# measured figure, benchmarks/results/demo.md) reads too.
DEMO_FLAGS ?= $(shell cat benchmarks/demo_flags.txt)

demo: $(DEMO_STAMP)
	$(BIN)/python -m keras_relational.experiments.train_boxworld --root_dir=$(DEMO_DIR) \
		$(DEMO_FLAGS)

# The docs build strictly (mkdocs.yml, site in build/site): a broken link, a missing results
# file or an API reference that no longer resolves fails the test command. The two workers share
# the tests by xdist's default load scheduling; work stealing with the `slow` tests first
# (PYTEST_ARGS=--dist=worksteal, see tests/conftest.py) was slower at the last measurement (2010 s
# against 1733 s: the two Ray tests ran side by side).
test: $(STAMP)
	$(BIN)/ruff check .
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --quiet
	$(BIN)/python -m pytest -n 2 --durations=15 $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
