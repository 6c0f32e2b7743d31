# tpurank's container image: every step of the compiled Vertex AI pipeline,
# the Vertex training job and the Dataflow workers run it.
#
#   make image IMAGE=us-docker.pkg.dev/PROJECT/REPO/tpurank:TAG   (build + push)
#   tpurank pipeline compile --target vertex ... --image THAT_URI
#
# Python 3.10 (TFX 1.15 needs < 3.11), exactly requirements.lock, tpurank
# itself, and the Beam SDK harness of the locked Beam version: Dataflow
# starts workers with this image as a custom SDK container
# (--sdk_container_image, --sdk_location=container), so they hold the
# project's code. `make image` passes BEAM_VERSION from the lock.
ARG PYTHON_IMAGE=python:3.10.13-slim-bookworm
ARG BEAM_VERSION=2.74.0

FROM apache/beam_python3.10_sdk:${BEAM_VERSION} AS beam

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TF_CPP_MIN_LOG_LEVEL=2
COPY --from=beam /opt/apache/beam /opt/apache/beam
WORKDIR /opt/tpurank

# Dependencies first (a layer that changes only with the lock).
COPY requirements.lock .
RUN pip install --no-cache-dir uv==0.13.9 \
 && uv pip sync --system --no-cache requirements.lock

COPY . .
# Imported from / so the installed package is checked, not the sources.
RUN uv pip install --system --no-cache --no-deps . \
 && cd / && python -c "import tpurank.cli, trainer.model, pipeline.pipeline"

# TPU workers (`make image TPU=1 LIBTPU_URL=...`, for `pipeline compile
# --tpu`): TensorFlow built for TPU VMs and its libtpu in /lib, as Vertex AI
# documents for custom TensorFlow 2.15 containers. The libtpu build that
# goes with TensorFlow 2.15 is listed under Cloud TPU's "Supported TPU
# configurations"; its URL is a required argument, not guessed here.
ARG TPU=0
ARG TF_TPU_WHEEL=https://storage.googleapis.com/cloud-tpu-tpuvm-artifacts/tensorflow/tf-2.15.0/tensorflow-2.15.0-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
ARG LIBTPU_URL=
RUN if [ "$TPU" = "1" ]; then \
      if [ -z "$LIBTPU_URL" ]; then \
        echo "TPU=1 needs LIBTPU_URL (the libtpu.so for TensorFlow 2.15)" >&2; \
        exit 1; \
      fi; \
      uv pip install --system --no-cache --no-deps "$TF_TPU_WHEEL" \
      && python -c "import urllib.request, sys; urllib.request.urlretrieve(sys.argv[1], '/lib/libtpu.so')" "$LIBTPU_URL"; \
    fi

# Dataflow runs the Beam boot program; Vertex steps give their own command.
ENTRYPOINT ["/opt/apache/beam/boot"]
