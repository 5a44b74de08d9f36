VENV ?= .venv
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

# The CUDA path end to end on a GPU machine (scripts/gpu-check.sh; one JSON line of results).
gpu-check: install
	bash scripts/gpu-check.sh --python $(VENV)/bin/python

clean:
	rm -rf $(VENV)
