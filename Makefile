# mprig: one command surface for people and CI.
#   make run    install everything, run experiments/smoke.yaml on the virtual rig, report
#   make test   install everything, run the whole test suite (unit, then integration)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CAMPAIGN ?= experiments/smoke.yaml

# Debian packages the rig, the VM mode, the collectors and the tests need.
APT_PACKAGES := iproute2 iperf3 mptcpd mptcpize tcpdump tshark ethtool openssh-server \
	openssh-client nftables qemu-system-x86 linux-image-amd64 busybox-static kmod procps \
	hostapd wpasupplicant iw python3-venv python3-dev gcc libc6-dev make git \
	chromium linux-source flex bison bc dwarves libelf-dev libssl-dev clang llvm libbpf-dev bpftool

.PHONY: all setup system venv run test unit integration lint bench clean help reproduce papers-docs
all: help

help:
	@echo "make run    install, then run $(CAMPAIGN) on the virtual rig and write a report"
	@echo "make test   install, then run the tests (unit, then integration)"
	@echo "make lint   ruff and mypy";  echo "make bench  benchmarks in bench/"

setup: system venv

# Installs only what is missing, so a second call costs one dpkg query.
system:
	@missing=$$(dpkg-query -W -f='$${Package} $${Status}\n' $(APT_PACKAGES) 2>/dev/null \
		| awk '$$NF != "installed" {print $$1}'; \
		for p in $(APT_PACKAGES); do dpkg-query -W "$$p" >/dev/null 2>&1 || echo "$$p"; done); \
	missing=$$(echo $$missing | tr ' ' '\n' | sort -u | tr '\n' ' '); \
	if [ -n "$${missing// /}" ]; then \
		echo "installing Debian packages: $$missing"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends $$missing; \
	fi

$(VENV)/.installed: pyproject.toml $(wildcard setup.py) $(wildcard collectors/*.c)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

venv: $(VENV)/.installed

# The results directory is the campaign's name (results/smoke for the default campaign).
RESULTS = results/$(shell sed -n 's/^name: *//p' $(CAMPAIGN) | head -n 1)

run: setup
	$(BIN)/mprig run $(CAMPAIGN)
	$(BIN)/mprig collect $(RESULTS)
	$(BIN)/mprig report $(RESULTS)

test: setup
	$(BIN)/python -m pytest tests

unit: venv
	$(BIN)/python -m pytest tests/unit

integration: setup
	$(BIN)/python -m pytest -m integration tests

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: setup
	$(BIN)/python -m bench

# A paper's full profile (hours; run it in the background: `nohup make reproduce SEED=000 &`):
# runs and collects its campaigns, writes reports/reproductions/$(SEED)/, then the numbers
# section of docs/papers.md. Commit both.
SEED ?=
reproduce: setup
	@test -n "$(SEED)" || { echo "usage: make reproduce SEED=000 (000..004)"; exit 2; }
	$(BIN)/mprig reproduce $(SEED) --profile full --run
	$(BIN)/mprig reproduce --docs docs/papers.md

papers-docs: venv
	$(BIN)/mprig reproduce --docs docs/papers.md

clean:
	rm -rf $(VENV) build *.egg-info
