# tpurank: `make demo` runs the main job end to end, `make test` the tests.
# Both set up .venv first (idempotent; quick once done).

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
UV_VERSION := 0.13.9
TPURANK := $(VENV)/bin/tpurank
STAMP := $(VENV)/.tpurank-installed
DEMO_DIR ?= demo_out
DEMO_COLLECTION ?= layout:nlp:random
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONWARNINGS ?= ignore::FutureWarning,ignore::DeprecationWarning

.PHONY: setup demo test test-fast lock clean bench bench-quick image

setup: $(STAMP)

# A Python 3.10: $(PYTHON) if given, python3.10 on PATH, else pyenv's.
$(PY):
	@py="$${PYTHON:-}"; \
	ok() { [ -n "$$1" ] && "$$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' 2>/dev/null; }; \
	if ! ok "$$py"; then py=""; \
	  for cand in python3.10 \
	      $$(command -v pyenv >/dev/null && ls -d "$$(pyenv root)"/versions/3.10*/bin/python 2>/dev/null) \
	      $$(ls -d "$$HOME"/.pyenv/versions/3.10*/bin/python 2>/dev/null); do \
	    if ok "$$cand"; then py="$$cand"; break; fi; \
	  done; \
	fi; \
	if [ -z "$$py" ]; then \
	  echo "error: tpurank needs Python 3.10 (TFX 1.15 supports < 3.11) and none was found:" >&2; \
	  echo "  tried \$$PYTHON, python3.10 on PATH and pyenv versions 3.10.*." >&2; \
	  echo "  Install one (e.g. 'pyenv install 3.10.13') or run 'make PYTHON=/path/to/python3.10 setup'." >&2; \
	  exit 1; \
	fi; \
	echo "setup: creating $(VENV) with $$py ($$($$py --version 2>&1))"; \
	"$$py" -m venv $(VENV)

$(UV): | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"

$(STAMP): requirements.lock pyproject.toml | $(UV)
	$(UV) pip sync --python $(PY) requirements.lock
	$(UV) pip install --python $(PY) --no-deps -e .
	@touch $(STAMP)

# Re-pins every version from requirements.in (needs the registry).
lock: | $(UV)
	$(UV) pip compile --python-version 3.10 --python $(PY) requirements.in -o requirements.lock

# Simulated data (see README): synthesize, validate, train ~2 minutes, rank
# the configs of one validation graph.
demo: setup
	rm -rf $(DEMO_DIR)
	@echo "== simulated data (runtimes from tpurank's cost model, not TPU measurements)"
	$(TPURANK) synth --collection $(DEMO_COLLECTION) --scale small --seed 0 --out $(DEMO_DIR)/data --quiet
	$(TPURANK) validate --quiet $(DEMO_DIR)/data/npz
	@echo "== TFX pipeline, local: ExampleGen -> Trainer -> RankingEvaluator -> Pusher"
	@start=$$(date +%s); \
	$(TPURANK) pipeline run --data $(DEMO_DIR)/data --collection $(DEMO_COLLECTION) --work-dir $(DEMO_DIR)/pipeline --max-minutes 3 && \
	echo "pipeline wall time: $$(( $$(date +%s) - start )) s"

test: setup
	$(PY) -m pytest -q -ra tests

# Everything but the slow end-to-end tests.
test-fast: setup
	$(PY) -m pytest -q -ra -m "not slow" tests

clean:
	rm -rf $(DEMO_DIR) .pytest_cache

# Every benchmark (about 77 minutes on 2 cores, measured): BENCHMARKS.md + plots under
# benchmarks/results/suite/. Simulated data throughout.
bench: setup
	$(PY) -m benchmarks.suite

# A reduced suite (about 9 minutes measured before the dask, realism, real and multi_worker parts; longer now, not re-measured) into bench_out/quick/.
bench-quick: setup
	$(PY) -m benchmarks.suite --quick

# The container image of the Vertex pipeline, its training job and Dataflow
# workers (see Dockerfile): build and push where docker runs. TPU=1
# LIBTPU_URL=... adds the TPU runtime.
IMAGE ?=
TPU ?= 0
LIBTPU_URL ?=
DOCKER ?= docker
BEAM_VERSION := $(shell sed -n 's/^apache-beam==//p' requirements.lock)
image:
	@if [ -z "$(IMAGE)" ]; then \
	  echo "make image: say where the image goes: make image IMAGE=REGION-docker.pkg.dev/PROJECT/REPO/tpurank:TAG" >&2; exit 2; fi
	@if ! command -v $(DOCKER) >/dev/null 2>&1; then \
	  echo "make image: docker is not installed on this machine, so nothing was built." >&2; \
	  echo "  On a machine with docker: docker build --build-arg BEAM_VERSION=$(BEAM_VERSION) -t $(IMAGE) . && docker push $(IMAGE)" >&2; \
	  echo "  or with Cloud Build: gcloud builds submit --tag $(IMAGE) ." >&2; exit 3; fi
	@if ! $(DOCKER) info >/dev/null 2>&1; then \
	  echo "make image: docker is installed but its daemon is not reachable here, so nothing was built." >&2; \
	  echo "  Start it, or use Cloud Build: gcloud builds submit --tag $(IMAGE) ." >&2; exit 3; fi
	$(DOCKER) build --build-arg BEAM_VERSION=$(BEAM_VERSION) --build-arg TPU=$(TPU) \
	    --build-arg LIBTPU_URL="$(LIBTPU_URL)" -t $(IMAGE) .
	$(DOCKER) push $(IMAGE)
