# kiln: `make demo` and `make test` work on a fresh Debian machine: they install what
# is missing (a virtualenv with kiln and its test dependencies, the Arm toolchain and
# QEMU from Debian), then run.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
APT_PACKAGES := gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm clang libclang-rt-14-dev
STAMP := $(VENV)/.kiln-installed

.PHONY: setup demo test test-fast benchmarks clean

.PHONY: toolchain
setup: $(STAMP) toolchain

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,farm]'
	touch $(STAMP)

# Install the Debian packages that are missing (root, or sudo when available).
toolchain:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

demo: setup
	$(PY) examples/demo.py

test: setup
	$(PY) -m pytest -q -n 2 --dist loadfile

test-fast: setup
	$(PY) -m pytest -q -m "not qemu and not slow"

benchmarks: setup
	$(PY) benchmarks/memory.py
	$(PY) benchmarks/host_speed.py
	$(PY) benchmarks/firmware.py

clean:
	rm -rf $(VENV) build *.egg-info
