"""Record, per host, every task that changed (or, under --check, would change) a host.

`mprig rig provision` enables it (ANSIBLE_CALLBACKS_ENABLED=mprig_changes) and names the
file with MPRIG_CHANGES_FILE; it writes one JSON document there when the playbook ends:

    {"check_mode": bool,
     "changes": [{"host", "task", "item", "how"}],   how: "changed" or "would run"
     "stats": {host: {"ok", "changed", "failures", "unreachable", "skipped"}}}

Under --check, ansible.builtin.command reports a command it would run as *skipped* ("Command
would have run if not in check mode"), so Ansible's own recap counts it nowhere; this
callback counts it as a change ("would run"). The roles' read-only commands run in check
mode too (check_mode: false), so the `when:` of each write sees the host as it is.
"""

from __future__ import annotations

import json
import os

from ansible import context
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: mprig_changes
type: aggregate
short_description: per-host list of the tasks that changed or would change
description:
  - Writes a JSON summary to the file named by MPRIG_CHANGES_FILE (nothing when unset).
requirements:
  - enable in callbacks_enabled
"""

WOULD_RUN = "Command would have run if not in check mode"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "mprig_changes"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._names = {}  # task uuid -> its name as shown (templated at task start)
        self._changes = []

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._names[task._uuid] = task.get_name().strip()

    v2_playbook_on_handler_task_start = v2_playbook_on_task_start

    def _record(self, result, how, item=None):
        task = result._task
        self._changes.append(
            {
                "host": result._host.get_name(),
                "task": self._names.get(task._uuid, task.get_name().strip()),
                "item": None if item is None else str(item),
                "how": how,
            }
        )

    @staticmethod
    def _would_change(result):
        """A command --check did not run, unless its task says it never changes anything
        (changed_when: false, like a read or `ip link set up`)."""
        if result._result.get("msg") != WOULD_RUN:
            return False
        conditions = result._task.changed_when or []
        return not (conditions and all(str(c).strip().lower() == "false" for c in conditions))

    def _label(self, res):
        return res.get("_ansible_item_label", res.get("item"))

    # Ansible strips "skipped" from the result it hands to the skipped callbacks: the
    # callback itself says the task was skipped, the message says why.
    def v2_runner_on_ok(self, result):
        if result._result.get("changed") and "results" not in result._result:
            self._record(result, "changed")  # (a loop's items were recorded one by one)

    def v2_runner_on_skipped(self, result):
        if self._would_change(result):
            self._record(result, "would run")

    def v2_runner_item_on_ok(self, result):
        if result._result.get("changed"):
            self._record(result, "changed", self._label(result._result))

    def v2_runner_item_on_skipped(self, result):
        if self._would_change(result):
            self._record(result, "would run", self._label(result._result))

    def v2_playbook_on_stats(self, stats):
        path = os.environ.get("MPRIG_CHANGES_FILE")
        if not path:
            return
        keys = ("ok", "changed", "failures", "unreachable", "skipped")
        doc = {
            "check_mode": bool(context.CLIARGS.get("check", False)),
            "changes": self._changes,
            "stats": {
                host: {k: stats.summarize(host)[k] for k in keys}
                for host in sorted(stats.processed)
            },
        }
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
