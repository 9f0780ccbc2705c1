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
APT_PACKAGES := iproute2 bash-builtins iperf3 mptcpd mptcpize tcpdump tshark ethtool openssh-server \
	openssh-client nftables qemu-system-x86 linux-image-amd64 busybox-static kmod procps \
	hostapd wpasupplicant iw python3-venv python3-dev gcc libc6-dev make git \
	chromium linux-source flex bison bc dwarves libelf-dev libssl-dev clang llvm libbpf-dev bpftool \
	libmptcpd3-dev libell-dev pkg-config mmdebstrap

.PHONY: all setup system venv run test test-long unit integration lint bench clean help reproduce papers-core papers-docs \
	paper-shard paper-full reproduce-archived \
	ns3-oracle ns3-engine kernel-vm test-kernel mptcpd-plugin bytecode
all: help

help:
	@echo "make run    install, then run $(CAMPAIGN) on the virtual rig and write a report"
	@echo "make test   install, then run the tests (unit, then integration)"
	@echo "make test-long  the long VM tests (hwsim Wi-Fi with site.yml, cross traffic, timeline; ~30 min)"
	@echo "make kernel-vm  a small VM kernel with the upstream MPTCP patches; make test-kernel boots it"
	@echo "make test-lab   the lab path end to end on a VM lab booting that kernel (needs make kernel-vm)"
	@echo "make lint   ruff and mypy";  echo "make bench  benchmarks in bench/"
	@echo "make ns3-oracle  ns-3 sweeps that check the Wi-Fi model (docs/wifi-model.md)"
	@echo "make paper-shard CAMPAIGN=experiments/papers/<c>-full.yaml SHARD=I/N  one shard, archived into reports/archived-runs/"
	@echo "make reproduce-archived PAPER=004  a full-profile report from the archived runs"
	@echo "make paper-full PAPER=000 [STOP_AFTER=8h] [PRUNE=1]  the shards a paper needs for n = 5 per cell, archived, then its reproduction"

setup: system venv ns3-engine mptcpd-plugin bytecode

# mprig's mptcpd plugin (kernel-configs/mptcpd/README.md), which makes `path_manager:
# userspace` open subflows; built under a temporary name and renamed, so mptcpd never loads
# half a file.
MPTCPD_PLUGIN := build/mptcpd-plugins/mprig_fullmesh.so

$(MPTCPD_PLUGIN): kernel-configs/mptcpd/mprig_fullmesh.c
	@mkdir -p $(dir $@)
	gcc -shared -fPIC -O2 -Wall -Wextra -Werror -fvisibility=hidden \
		$$(pkg-config --cflags mptcpd ell) -o $@.tmp $< $$(pkg-config --libs mptcpd ell)
	mv -f $@.tmp $@

mptcpd-plugin: $(MPTCPD_PLUGIN)

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

$(VENV)/.installed: pyproject.toml $(wildcard setup.py) $(wildcard collectors/*.c mprig/*.c)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

venv: $(VENV)/.installed

# Bytecode for the venv and the project, written explicitly: with PYTHONDONTWRITEBYTECODE set
# (as in many CI images) pip installs none and Python writes none, and the VM cannot write
# it (the host's file system is read-only there), so every process compiled its imports
# again. Under software emulation a guest's `import pandas` took 65 s compiling, and mprig's
# own imports 20.5 s against 15.5 s from bytecode (measured). Only stale files are written.
bytecode: venv
	@$(BIN)/python -m compileall -q -j 0 $(VENV)/lib mprig collectors reports > /dev/null

# The results directory is the campaign's name (results/smoke for the default campaign).
RESULTS = results/$(shell sed -n 's/^name: *//p' $(CAMPAIGN) | head -n 1)

# `mprig collect RESULTS`, then the COMMANDS that use its tables ($(1), $(2); no commas).
# collect exits 1 when it wrote every table but some runs' artifacts had problems (listed,
# those metrics null, reports leave the runs out), above 1 when it could not collect: after
# the first the COMMANDS run all the same (archive, report) and the recipe then fails with
# 1; after the second they do not, and the recipe fails with collect's status.
define collect_then
	status=0; $(BIN)/mprig collect $(1) || status=$$?; \
	if [ $$status -gt 1 ]; then exit $$status; fi; \
	$(2); \
	if [ $$status -ne 0 ]; then echo "make $@: mprig collect found artifact problems in $(1)" \
		"(listed above; \`mprig collect $(1)\` lists them again): those metrics are null;" \
		"the steps after it ran all the same; exit status 1" >&2; fi; \
	exit $$status
endef

run: setup
	$(BIN)/mprig run $(CAMPAIGN)
	$(call collect_then,$(RESULTS),$(BIN)/mprig report $(RESULTS))

# `make test` is what CI runs (budget 45 minutes on 2 cores): two pytest processes side by
# side (tests/parallel.py), the unit tests then the VM tests in one, the native integration
# tests in the other; the VM tests' campaigns run alone (tests/quiet.py). 37.8 minutes in a
# clean-clone run here on 2026-12-07; 41.4-44.4 here and 52.8 in stop 43's CI while the unit
# tests ran with the native ones and waited through every quiet section. The
# guest's campaigns and the native traffic tests cannot share 2 cores (tests/parallel.py).
# Tests marked `long` (Ansible converging site.yml inside the emulated VM, about 20 minutes;
# the ns-3 real-time engine, which needs libns3-dev) run with `make test-long`.
test: setup
	$(BIN)/python tests/parallel.py

test-long: setup ns3-engine
	$(BIN)/python -m pytest -m long --ignore=tests/integration/test_kernel_vm.py \
		--ignore=tests/integration/test_lab_vm.py --ignore=tests/integration/test_kernel_role_vm.py tests

# A small VM kernel with the upstream patch series (0002: net.mptcp.proactive_sched) into
# /var/cache/mprig/kernel-vm/bzImage (kernel-configs/README.md: time, config); test-kernel
# boots it under virtme-ng and checks the release and the sysctl (marked long, and not in
# test-long, which would fail on every machine that has not built it).
kernel-vm: setup
	kernel-configs/build-vm-kernel.sh

test-kernel: setup
	$(BIN)/python -m pytest -m long tests/integration/test_kernel_vm.py

# The lab path end to end (issue 17) on a VM lab: one guest booting make kernel-vm's bzImage,
# lab hosts as namespaces with sshd, hwsim Wi-Fi; site.yml provisions it from its generated
# inventory, then the smoke campaign runs on it as a lab (README: what it proves, wall time).
# Then the kernel role's build path: playbooks/kernel.yml builds Debian packages on this
# machine, installs them on a guest with a disk of its own, reboots it and verifies.
.PHONY: test-lab
test-lab: setup
	$(BIN)/python -m pytest -m long -v -s --durations=0 tests/integration/test_lab_vm.py \
		tests/integration/test_kernel_role_vm.py

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

# A paper's full profile (hours; run it in the background: `nohup make reproduce PAPER=000 &`):
# runs and collects its campaigns, writes reports/reproductions/$(PAPER)/, then the numbers
# section of docs/papers.md. Commit both. (SEED= is the old spelling of PAPER=, still read.)
SEED ?=
PAPER ?= $(SEED)
reproduce: setup
	@test -n "$(PAPER)" || { echo "usage: make reproduce PAPER=000 (000..004)"; exit 2; }
	$(BIN)/mprig reproduce $(PAPER) --profile full --run
	$(BIN)/mprig reproduce --docs docs/papers.md

# A full profile in parts that outlive the machine: shard SHARD (I/N, `mprig run --shard`)
# of CAMPAIGN, run into results/shard-I-of-N/, collected, and its complete runs added to
# reports/archived-runs/<campaign>/ (run.json and metrics, no captures; commit it). Runs the
# archive holds are skipped (--skip-archived), so a shard cut short, archived with the runs
# it completed, is finished by running it again, on this machine or a fresh one. Example:
#   nohup make paper-shard CAMPAIGN=experiments/papers/004-fig4-full.yaml SHARD=1/5 &
# N = the campaign's repetitions makes each shard one repetition of every cell. STOP_AFTER=2h
# starts no run expected to end later; the runs done are archived and the next call goes on.
# REDO_RIG_LIMITED=1 runs the shard's archived rig-limited runs again (reports leave them
# out) and the archive takes each clean rerun in place of the rig-limited record.
# Then docs/papers.md's table of what is left. When collect finds artifact problems (exit 1,
# collect_then), the shard is archived and the table rewritten all the same, and make fails;
# when it could not collect (exit 4: the directory in use, a file unwritable) make stops there.
# `make reproduce-archived PAPER=004` then reports from what the archives hold.
ARCHIVED := reports/archived-runs
SHARD ?=
STOP_AFTER ?=
SHARD_RESULTS = results/shard-$(subst /,-of-,$(SHARD))
CAMPAIGN_NAME = $(shell sed -n 's/^name: *//p' $(CAMPAIGN) | head -n 1)
paper-shard: setup
	@test -n "$(SHARD)" || { echo "usage: make paper-shard CAMPAIGN=experiments/papers/<campaign>.yaml SHARD=I/N"; exit 2; }
	$(BIN)/mprig run $(CAMPAIGN) --shard $(SHARD) --results $(SHARD_RESULTS) \
		$(if $(STOP_AFTER),--stop-after $(STOP_AFTER)) \
		$(if $(REDO_RIG_LIMITED),--redo-rig-limited) \
		$$(test -d $(ARCHIVED)/$(CAMPAIGN_NAME) && echo --skip-archived $(ARCHIVED)/$(CAMPAIGN_NAME)) \
		|| echo "mprig run: not every run of the shard is complete; archiving those that are"
	$(call collect_then,$(SHARD_RESULTS)/$(CAMPAIGN_NAME),\
		$(BIN)/mprig archive $(if $(PRUNE),--prune) $(SHARD_RESULTS)/$(CAMPAIGN_NAME) $(ARCHIVED)/$(CAMPAIGN_NAME); \
		$(BIN)/mprig reproduce --docs docs/papers.md)

# A paper's full profile at n = MIN_N (default 5) per cell: `mprig backlog PAPER --run` runs
# shard 1/N (N = repetitions // MIN_N, K of every cell) of each campaign short of MIN_N into
# the archives (run, collect, archive; rig-limited runs again), then, once every cell holds
# MIN_N, writes reports/reproductions/PAPER/ with --min-n and docs/papers.md (whose table of
# what is left is rewritten after every call, as after every paper-shard; the recipes run
# under `bash -e`, hence `|| status=$?`). STOP_AFTER=8h
# starts no run expected to end later; `make paper-full` again goes on. Commit the archives.
# PRUNE=1 (here and for paper-shard): the bundles an archive holds leave results/ with their
# captures (`mprig archive --prune`; 64-71 MB a run at 10-40 m, about 200 GB for paper 003).
MIN_N ?= 5
paper-full: setup
	@test -n "$(PAPER)" || { echo "usage: make paper-full PAPER=000 [MIN_N=5] [STOP_AFTER=8h]"; exit 2; }
	status=0; $(BIN)/mprig backlog $(PAPER) --min-n $(MIN_N) --run $(if $(PRUNE),--prune) \
		$(if $(STOP_AFTER),--stop-after $(STOP_AFTER)) || status=$$?; \
		$(BIN)/mprig reproduce --docs docs/papers.md; exit $$status
	$(BIN)/mprig reproduce $(PAPER) --profile full --results $(ARCHIVED) --min-n $(MIN_N)
	$(BIN)/mprig reproduce --docs docs/papers.md --html

# A paper's full-profile reproduction from the archived runs (results/archived-reproductions/
# PAPER/, listing what no archive holds yet); once every run is archived, `mprig reproduce
# PAPER --profile full --results reports/archived-runs` writes reports/reproductions/PAPER/.
reproduce-archived: venv
	@test -n "$(PAPER)" || { echo "usage: make reproduce-archived PAPER=004 (000..004)"; exit 2; }
	$(BIN)/mprig reproduce $(PAPER) --profile full --results $(ARCHIVED) \
		--out results/archived-reproductions --partial

# Every paper's core profile: the cells of its headline claims at n = 5 (about 2.5 h on 2 cores
# without KVM; run it in the background: `nohup make papers-core > papers-core.log 2>&1 &`).
# Writes reports/reproductions/<paper>/ for all five papers and docs/papers.md's numbers.
papers-core: setup
	for paper in 000 001 002 003 004; do $(BIN)/mprig reproduce $$paper --profile core --run || exit 1; done
	$(BIN)/mprig reproduce --docs docs/papers.md

# Re-renders, from the committed files alone (runs nothing), docs/papers.md's numbers and
# every reports/reproductions/<paper>/report.html.
papers-docs: venv
	$(BIN)/mprig reproduce --docs docs/papers.md --html

# ns-3 as the oracle of the Wi-Fi model (issue 16): builds oracle/ns3/wifi_link against
# Debian's libns3-dev 3.37 and runs the papers' distance sweeps into reports/references/ns3/
# (about 6 minutes on one busy core). Not part of setup or test: tests read the committed CSVs.
# Linked by library name, not pkg-config: ns3-*.pc names libgsl.so, which only libgsl-dev
# ships, while the runtime library comes with libns3.37.
NS3_PACKAGES := libns3-dev g++
NS3_BIN := oracle/ns3/build/wifi_link
NS3_LIBS := -lns3-wifi -lns3-internet -lns3-applications -lns3-mobility -lns3-propagation \
	-lns3-point-to-point -lns3-network -lns3-core
NS3_OUT := reports/references/ns3
NS3_SWEEP := --distances=10,20,30,40,50,60,70,80,90,100 --runs=3 --warmup=1 --measure=5
# $(1) output file name, $(2) the program's arguments; the command heads the CSV.
define ns3_sweep
	@echo "ns-3 oracle: $(NS3_OUT)/$(1)"
	@{ echo "# $(NS3_BIN) $(2)"; echo "# ns-3 $$(dpkg-query -W -f='$${Version}' libns3-dev)"; \
		$(NS3_BIN) $(2); } > $(NS3_OUT)/$(1).tmp && mv $(NS3_OUT)/$(1).tmp $(NS3_OUT)/$(1)
endef

$(NS3_BIN): oracle/ns3/wifi_link.cc oracle/ns3/wifi_setup.h
	@$(MAKE) --no-print-directory system APT_PACKAGES="$(NS3_PACKAGES)"
	@mkdir -p $(dir $@)
	g++ -O2 -std=c++17 -Wall -o $@ $< $(NS3_LIBS)

# The real-time link engine (issue 16 parts 3-4; docs/ns3-engine.md): a path with
# `engine: ns3` crosses it. `make setup` builds it (installs libns3-dev and g++ first).
NS3_ENGINE := oracle/ns3/build/wifi_rt
NS3_ENGINE_LIBS := -lns3-wifi -lns3-fd-net-device -lns3-mobility -lns3-propagation \
	-lns3-network -lns3-core

$(NS3_ENGINE): oracle/ns3/wifi_rt.cc oracle/ns3/wifi_setup.h
	@$(MAKE) --no-print-directory system APT_PACKAGES="$(NS3_PACKAGES)"
	@mkdir -p $(dir $@)
	g++ -O2 -std=c++17 -Wall -o $@ $< $(NS3_ENGINE_LIBS)

ns3-engine: $(NS3_ENGINE)

ns3-oracle: $(NS3_BIN)
	@mkdir -p $(NS3_OUT)
	$(call ns3_sweep,paper000-11g-54.csv,--standard=11g --rate=54 --exponent=2.06 $(NS3_SWEEP))
	$(call ns3_sweep,paper003-11g-54.csv,--standard=11g --rate=54 --exponent=2.2 $(NS3_SWEEP))
	$(call ns3_sweep,paper003-11g-6.csv,--standard=11g --rate=6 --exponent=2.2 $(NS3_SWEEP))
	$(call ns3_sweep,paper003-11b-2.csv,--standard=11b --rate=2 --exponent=2.2 $(NS3_SWEEP))
	$(call ns3_sweep,paper003-11g-54-delack2.csv,--standard=11g --rate=54 --exponent=2.2 --delAck=2 $(NS3_SWEEP))
	$(call ns3_sweep,paper003-11g-54-nopd.csv,--standard=11g --rate=54 --exponent=2.2 --preambleDetection=0 $(NS3_SWEEP))
	$(call ns3_sweep,paper003-11g-6-nopd.csv,--standard=11g --rate=6 --exponent=2.2 --preambleDetection=0 $(NS3_SWEEP))
	$(call ns3_sweep,paper003-11b-2-nopd.csv,--standard=11b --rate=2 --exponent=2.2 --preambleDetection=0 $(NS3_SWEEP))
	$(call ns3_sweep,ideal-11g.csv,--standard=11g --manager=ideal --exponent=2.2 $(NS3_SWEEP))
	$(call ns3_sweep,minstrel-11g.csv,--standard=11g --manager=minstrel --exponent=2.2 $(NS3_SWEEP))

clean:
	rm -rf $(VENV) build *.egg-info
