VENV ?= .venv
RAGEN = $(VENV)/bin/ragen

.PHONY: install train test test-fast clean

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

clean:
	rm -rf $(VENV)
