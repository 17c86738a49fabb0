"""The permission gate: whether a call runs, asked or not. In order: a "never" rule of the
project refuses it (in every approval mode); a call that needs no permission, or that the
session's "always" covers, runs; the project's "always" rules, then the approval mode, may run it
unasked; else the user is asked, and may answer for the project from now on
(permissions.projectRules: "Always in this project", "Never in this project")."""

from __future__ import annotations

import dataclasses

from bob_acp import rules as rules_module
from bob_acp.engine.calls import Call, NotRun
from bob_acp.engine.conversation import Conversation
from bob_acp.exceptions import Cancelled
from bob_acp.sandbox import policy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from bob_acp.cancel import Cancel
    from bob_acp.config import Config
    from bob_acp.engine.sink import Sink
    from bob_acp.log import Logger
    from bob_acp.rules.store import Store

ALLOW_PROJECT, REJECT_PROJECT = "allow_project", "reject_project"  # (the choices that keep a rule)


class Gate:
    def __init__(self, cfg: Config, log: Logger | None):
        self.cfg = cfg
        self.log = log
        self.store: Store | None = None
        if cfg.permissions.projectRules:
            from bob_acp.rules.store import Store

            self.store = Store()

    def permitted(self, conv: Conversation, call: Call, sink: Sink, cancel: Cancel) -> bool:
        """True: the call runs; False: the user rejected it; NotRun: a rule refused it.
        Cancelled when the turn is cancelled while the user is asked."""
        tool = call.tool
        if tool is None:  # (never asked: an unknown tool's call is answered before)
            return False
        judged = self._judge(conv, call, sink)
        if judged is not None and judged[0] == rules_module.NEVER:
            call.rule = judged[1][0].shown()
            self._log("refused by a rule of this project", call)
            raise NotRun(f"[refused: the user keeps a rule for this project: {call.rule}. Do not try to reach the "
                         "same end another way; if it is needed, say so and ask the user.]")
        if not tool.needs_permission or (call.grant is not None and call.grant in conv.allow_always):
            return True
        if tool.exact(call.arguments):  # (a command out of its sandbox: asked each time, whatever the rules)
            judged = None
        if judged is not None:  # every part of it covered by the project's "always" rules
            call.rule = "; ".join(rule.shown() for rule in judged[1])
            call.confine = tool.one_file  # (a file the rule covers is in the project: its write must stay there)
            self._log("run by a rule of this project", call)
            return True
        by_mode = (conv.mode in ("allow-edits", "sandboxed") and tool.one_file
                   and tool.in_project(call.arguments, conv.workspace))
        if conv.mode == "allow-all" or by_mode or policy.runs_unasked(conv.sandbox, conv.mode, call.sandboxed):
            call.confine = by_mode  # unasked because it stays in the project: its write must, whatever links do
            if self.log is not None:
                self.log.info("[acp] run without asking (permissions.mode {mode}): {title}", mode=conv.mode,
                              tool=call.name, call=call.ref, title=call.title)
            return True
        if self.store is not None and not tool.exact(call.arguments):
            call.proposal = rules_module.proposal(call.name, call.arguments, conv.workspace)
        choice = sink.permission(call, cancel)
        if cancel.is_set():
            raise Cancelled()
        if choice == "allow_always" and call.grant is not None:
            conv.allow_always.add(call.grant)
        if choice in (ALLOW_PROJECT, REJECT_PROJECT) and call.proposal is not None:
            decision = rules_module.ALLOW if choice == ALLOW_PROJECT else rules_module.NEVER
            self._keep(conv, dataclasses.replace(call.proposal, decision=decision), sink)
            if choice == REJECT_PROJECT and not call.reason:
                never = call.proposal.shown().replace("always", "never", 1)
                call.reason = f"the user keeps a rule for this project: {never}"
        return choice in ("allow", "allow_always", ALLOW_PROJECT)

    def _judge(self, conv: Conversation, call: Call, sink: Sink) -> tuple[str, list[rules_module.Rule]] | None:
        if self.store is None or call.name not in ("bash", *rules_module.FILE_TOOLS):
            return None
        kept = self.store.load(conv.workspace.cwd)
        doubt = kept.doubt
        if doubt and doubt not in conv.told:
            conv.told.add(doubt)  # (once a session: every call would say it again)
            sink.notice("This project's rules are not all applied", doubt)
            if self.log is not None:
                self.log.warning(f"[acp] {doubt}")
        usable = kept.usable()
        if not usable:
            return None
        return rules_module.judge(usable, call.name, call.arguments, conv.workspace)

    def _keep(self, conv: Conversation, rule: rules_module.Rule, sink: Sink) -> None:
        assert self.store is not None
        from bob_acp.rules.store import RulesError

        try:
            self.store.add(conv.workspace.cwd, rule)
        except (OSError, RulesError) as exc:
            sink.notice("The rule was not kept", f"{rule.shown()}: {exc}")
            if self.log is not None:
                self.log.warning(f"[acp] project rule not kept ({rule.shown()}): {exc}")
            return
        if self.log is not None:
            self.log.info(f"[acp] project rule kept for {conv.workspace.cwd}: {rule.shown()}")

    def _log(self, what: str, call: Call) -> None:
        if self.log is not None:
            self.log.info(f"[acp] {what} ({{rule}}): {{title}}", rule=call.rule, tool=call.name, call=call.ref,
                          title=call.title)
