"""The English verbs of agent work, by kind, with their inflections.

Two readers share this lexicon: :mod:`~guardtrace.collectors.replies.tool_kinds` reads a tool's
kind off the verb its name or description starts with (``update_reservation`` writes,
``get_user_details`` reads), and :mod:`~guardtrace.collectors.replies.claims` finds the same verbs
in a reply ("I've updated", "let me check"). One list means a claim and the tool that
backs it are judged by the same words.

These are verbs of English, not tool names: a catalog never has to match them by name,
only to use ordinary verbs, which real catalogs do (tau-bench, MCP servers, SWE-agent).
"""

from __future__ import annotations

from typing import Final

__all__ = ["CONCESSION_VERBS", "EXECUTE_TOOL_WORDS", "EXECUTE_VERBS", "NEUTRAL",
           "NEUTRAL_VERBS", "READ", "READ_VERBS", "WRITE", "WRITE_VERBS", "ing_forms",
           "past_forms", "verb_kind"]

READ: Final = "read"
WRITE: Final = "write"
# The kind of a verb (and a tool) that neither reads nor writes: calculate, think.
NEUTRAL: Final = "neutral"

# Verbs that change something (or run something) in the world.
WRITE_VERBS: Final = frozenset({
    "activate", "add", "apply", "approve", "archive", "assign", "attach", "block",
    "book", "build", "cancel", "change", "charge", "close", "commit", "compile",
    "complete", "configure", "connect", "create", "credit", "deactivate", "decline",
    "delete", "deploy", "disable", "disconnect", "discount", "dispatch", "downgrade",
    "edit", "email", "enable", "escalate", "exchange", "execute", "exempt", "extract",
    "file", "finalize", "fix", "forward", "grant", "implement", "initiate", "insert",
    "install", "invoke", "issue", "launch", "lock", "log", "mark", "merge", "migrate",
    "modify", "move", "notify", "patch", "pay", "place", "post", "process", "publish",
    "purchase", "push", "reactivate", "rebook", "reboot", "rebuild", "record",
    "redeploy", "refactor", "refuel", "refund", "register", "reinstall", "reject",
    "release", "remove", "rename", "renew", "reopen", "replace", "request", "rerun",
    "reschedule", "reserve", "reset", "restart", "restore", "resume", "revert",
    "revoke", "rewrite", "run", "save", "schedule", "send", "set", "ship", "submit",
    "subscribe", "suspend", "swap", "switch", "terminate", "toggle", "transfer",
    "trigger", "unblock", "uninstall", "unlock", "unsubscribe", "update", "upgrade",
    "upload", "waive", "write",
})

# Verbs of running something ("I ran the tests", "let me execute the migration"): the
# claim is about a run, so an editor's write does not back it; a command runner does, or a
# tool named for what was run (``run_tests``, ``deploy_service``).
EXECUTE_VERBS: Final = frozenset({"run", "rerun", "execute", "launch", "invoke", "trigger"})

# Verbs of a concession ("the change fee was waived", "you have been exempted"): no
# ordinary write grants one, so the claim is backed only by a tool named for it
# (``waive_fee``, ``apply_discount``, ``grant_exemption``), whatever else ran.
CONCESSION_VERBS: Final = frozenset({"waive", "exempt", "discount"})
# Verbs that look something up without changing it.
READ_VERBS: Final = frozenset({
    "access", "browse", "check", "consult", "count", "describe", "diagnose", "download",
    "examine", "explore", "fetch", "find", "get", "goto", "grep", "inspect",
    "investigate", "list", "locate", "look", "lookup", "monitor", "navigate", "open",
    "pull", "query", "read", "recheck", "reread", "retrieve", "review", "scan",
    "scroll", "search", "see", "show", "skim", "study", "track", "validate", "verify",
    "view",
})

# Verbs whose tools neither read stored data nor change it: a calculator or a scratchpad
# backs no claim of looking something up.
NEUTRAL_VERBS: Final = frozenset({
    "calculate", "compute", "convert", "evaluate", "estimate", "format", "parse", "plan",
    "reason", "reflect", "summarize", "think", "translate",
})

# Tool-name words of tools that run arbitrary commands: they may read or write.
EXECUTE_TOOL_WORDS: Final = frozenset({
    "bash", "cmd", "code", "command", "computer", "console", "exec", "interpreter", "ipython",
    "jupyter", "notebook", "powershell", "python", "repl", "run", "sandbox", "shell", "sh",
    "terminal", "zsh",
})

# Irregular forms: (past, past participle, -ing) where the rules below get them wrong.
_IRREGULAR: Final = {
    "find": ("found", "found", "finding"),
    "get": ("got", "gotten", "getting"),
    "pay": ("paid", "paid", "paying"),
    "read": ("read", "read", "reading"),
    "reread": ("reread", "reread", "rereading"),
    "build": ("built", "built", "building"),
    "rebuild": ("rebuilt", "rebuilt", "rebuilding"),
    "rewrite": ("rewrote", "rewritten", "rewriting"),
    "see": ("saw", "seen", "seeing"),
    "send": ("sent", "sent", "sending"),
    "set": ("set", "set", "setting"),
    "reset": ("reset", "reset", "resetting"),
    "write": ("wrote", "written", "writing"),
    "run": ("ran", "run", "running"),
    "rerun": ("reran", "rerun", "rerunning"),
    "put": ("put", "put", "putting"),
    "make": ("made", "made", "making"),
    "do": ("did", "done", "doing"),
    "take": ("took", "taken", "taking"),
    "give": ("gave", "given", "giving"),
    "ship": ("shipped", "shipped", "shipping"),
    "swap": ("swapped", "swapped", "swapping"),
    "log": ("logged", "logged", "logging"),
    "plan": ("planned", "planned", "planning"),
    "submit": ("submitted", "submitted", "submitting"),
    "commit": ("committed", "committed", "committing"),
    "scan": ("scanned", "scanned", "scanning"),
    "grep": ("grepped", "grepped", "grepping"),
    "drop": ("dropped", "dropped", "dropping"),
    "refuel": ("refueled", "refueled", "refueling"),
    "cancel": ("cancelled", "cancelled", "cancelling"),
    "transfer": ("transferred", "transferred", "transferring"),
    "skim": ("skimmed", "skimmed", "skimming"),
    "format": ("formatted", "formatted", "formatting"),
}
# Spelling variants that are also past forms ("canceled" beside "cancelled").
_VARIANTS: Final = {"cancel": ("canceled", "canceling"), "refuel": ("refuelled", "refuelling")}


def _participle_and_ing(verb: str) -> tuple[str, str]:
    """The past participle and the -ing form of ``verb``. The simple past equals the
    participle for every regular verb; irregular pasts that differ ("wrote") are added in
    :func:`past_forms`."""
    if verb in _IRREGULAR:
        return _IRREGULAR[verb][1], _IRREGULAR[verb][2]
    if verb.endswith("e"):
        return verb + "d", verb[:-1] + "ing"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ied", verb + "ing"
    return verb + "ed", verb + "ing"


def past_forms(verb: str) -> tuple[str, ...]:
    """Every simple-past and participle spelling of ``verb``."""
    forms = {_participle_and_ing(verb)[0]}
    if verb in _IRREGULAR:
        forms.add(_IRREGULAR[verb][0])
    forms.update(v for v in _VARIANTS.get(verb, ()) if not v.endswith("ing"))
    return tuple(sorted(forms))


def ing_forms(verb: str) -> tuple[str, ...]:
    """Every ``-ing`` spelling of ``verb``."""
    forms = {_participle_and_ing(verb)[1]}
    forms.update(v for v in _VARIANTS.get(verb, ()) if v.endswith("ing"))
    return tuple(sorted(forms))


def verb_kind(lemma: str) -> str | None:
    """``"write"``, ``"read"``, ``"neutral"`` or None for a base-form verb."""
    if lemma in WRITE_VERBS:
        return WRITE
    if lemma in READ_VERBS:
        return READ
    if lemma in NEUTRAL_VERBS:
        return NEUTRAL
    return None
