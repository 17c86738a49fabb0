"""Every configuration key, declared once: its type (the annotation), its default, its limits,
its value in the full profile, and its documentation. bob_acp.config validates the file against
these declarations and makes `--check`'s dump and the configuration reference (README) from
them; the classes are also the configuration's types, so `cfg.model.nmae` is a type error.

A class attribute `name: T = key(...)` is a key; `name: Section = section(Class)` a section.
"""

from __future__ import annotations

from collections import namedtuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# (namedtuples, not typing.NamedTuple or dataclasses: start-up imports neither)
Key = namedtuple("Key", "default doc choices minimum maximum path full env kind nullable",
                 defaults=((), None, None, False, None, None, None, False))
SectionRef = namedtuple("SectionRef", "cls doc")


def key(default: Any, doc: str, *, choices: tuple[Any, ...] = (), minimum: float | None = None,
        maximum: float | None = None, path: bool = False, full: Any = None, env: str | None = None) -> Any:
    """A key: `choices` makes it an enum; `path`: relative to the config file's folder; `full`:
    its value in the full profile (None: the profile leaves it); `env`: the variable that overrides it."""
    return Key(default, doc, choices, minimum, maximum, path, full, env)


def section(cls: type, doc: str = "") -> Any:
    return SectionRef(cls, doc)


class Section:
    """Read-only attribute access to one level of the config (cfg.model.name)."""

    def __init__(self, values: dict[str, Any]):
        # In the instance's own __dict__, so cfg.model.name is a plain attribute lookup: the
        # config is read on every request's path (a __getattr__ per step cost a Python call).
        own = object.__getattribute__(self, "__dict__")
        own.update(values)
        own["_values"] = values

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("config is read-only")

    def as_dict(self) -> dict[str, Any]:
        values: dict[str, Any] = object.__getattribute__(self, "_values")
        return {k: v.as_dict() if isinstance(v, Section) else v for k, v in values.items()}


# ---- the sections ---------------------------------------------------------------------------------

class Price(Section):
    input: float | None = key(None, "per million input tokens", minimum=0)
    output: float | None = key(None, "per million output tokens; set both to see the cost in usage_update",
                               minimum=0)


class ModelSettings(Section):
    provider: str = key("openai", "openai (chat completions) | openai-responses (the Responses API) | anthropic | "
                        "script; no usable provider: prompts are refused",
                        choices=("openai", "openai-responses", "anthropic", "script"), env="BOB_PROVIDER")
    name: str = key("gpt-4.1-mini", "the model's name at the provider ($BOB_MODEL naming the id of a models: entry "
                                    "picks that entry instead)", env="BOB_MODEL")
    baseUrl: str | None = key(None, "null: the provider's official endpoint; e.g. http://127.0.0.1:11434/v1",
                              env="BOB_BASE_URL")
    apiKeyEnv: str | None = key(None, "the key's variable; null: OPENAI_API_KEY or ANTHROPIC_API_KEY by provider")
    apiKeyFile: str | None = key(None, "a file holding the key alone, readable by its owner only (0600), used when "
                                 "the variable is unset (bob-acp setup writes one)", path=True)
    script: str | None = key(None, "provider script: the script file", path=True)
    maxTokens: int | None = key(None, "the reply's token cap (anthropic: 8192 when null)", minimum=1)
    temperature: float | None = key(None, "0-2; null: the provider's default", minimum=0, maximum=2)
    timeout: float = key(120, "seconds without an event from the model before giving up", minimum=0.001,
                         maximum=86400)
    callTimeout: float = key(600, "seconds a whole model call may take", minimum=0.001, maximum=86400)
    retries: int = key(4, "retries on 429, 5xx and connection errors", minimum=0, maximum=20)
    thinking: int | None = key(None, "anthropic: extended thinking's budget in tokens (at least 1024); null: off",
                               minimum=1024)
    price: Price = section(Price, "per million tokens")
    choices: list[str] | str = key([], "more model names at this endpoint the model picker offers "
                                    "(acp.configOptions), or auto: what the server lists at GET /models")
    reasoning: str | None = key(None, "the reasoning level a session starts with (openai: reasoning_effort; "
                                "openai-responses: reasoning.effort; anthropic: a thinking budget)",
                                choices=("off", "low", "medium", "high"))
    window: int | None = key(None, "this model's context window in tokens; null: context.window", minimum=256,
                             maximum=2 ** 40)
    headers: dict[str, str] = key({}, 'sent with every request; "${VAR}" in a value reads the environment (kept '
                                  "from the tools and redacted, like a key)")
    query: dict[str, str] = key({}, 'added to the URL, e.g. {api-version: "2024-10-21"} for Azure OpenAI')
    keyHeader: str | None = key(None, "send the key in this header as it is (Azure: api-key); null: the "
                                "provider's own (Authorization: Bearer, or x-api-key)")
    extraBody: dict[str, Any] = key({}, "merged into every request body (vLLM's chat_template_kwargs, "
                                    "OpenRouter's provider)")


class ModelEntry(ModelSettings):
    """A model the picker offers: `model:` (its id is its name) or an entry of `models:`."""

    id: str


class Context(Section):
    window: int = key(128000, "the model's context window, in tokens (also usage_update's size)", minimum=256,
                      maximum=2 ** 40)
    threshold: float = key(0.8, "compress before a model call past this fraction of the window", minimum=0.01,
                           maximum=1)
    keepLastTurns: int = key(2, "turns kept verbatim by compression", minimum=0, maximum=1000000)


class Sessions(Section):
    enabled: bool = key(False, "keep sessions on disk and offer session/load", full=True)
    dir: str = key(".bob/sessions", "relative to the session's folder")


class Bash(Section):
    timeout: float = key(120, "seconds a command may run", minimum=0.001)
    outputLimit: int = key(30000, "characters of output kept (head and tail)", minimum=256, maximum=16 * 1024 * 1024)


class ToolEnv(Section):
    drop: list[str] = key(["*_API_KEY", "*_SECRET*", "*_TOKEN"], "variables (shell patterns) the tools' processes "
                          "do not inherit")


class ToolLimits(Section):
    processes: int = key(512, "processes (threads included) one session's sandboxed commands may have at once",
                         minimum=16, maximum=4000000)
    memory: int | None = key(None, "MiB of memory one session's sandboxed commands may use together, /dev/shm "
                             "included, where a memory cgroup can be made (else each process, and /dev/shm); "
                             "null: a quarter of the machine's memory", minimum=16)


class Tools(Section):
    bash: Bash = section(Bash)
    maxReadBytes: int = key(262144, "read_file's cap per call", minimum=1, maximum=64 * 1024 * 1024)
    sandbox: str = key("off", "off | workspace: every command in a sandbox of the session's own (writes only in "
                       "its folders and a /tmp of its own; .git, .bob and AGENTS.md read-only; no network, no "
                       "other program's sockets; hands off Bob); where the kernel cannot give all of it, commands "
                       "are asked | best-effort: what the kernel gives, unasked in sandboxed mode",
                       choices=("off", "workspace", "best-effort"), full="workspace")
    sandboxNetwork: bool = key(False, "under the sandbox: the network (TCP and UDP to any host, localhost "
                               "included); other programs' UNIX sockets stay unreachable")
    sandboxUnixSockets: str = key("deny", "under the sandbox: deny: no command can make a UNIX socket (a seccomp "
                                  "filter; socketpair stays), so no other program's (ssh-agent, Docker, D-Bus, tmux) "
                                  "is reachable | allow: commands may make and reach UNIX sockets",
                                  choices=("deny", "allow"))
    sandboxHide: list[str] = key(["~/.ssh", "~/.aws", "~/.gnupg", "~/.netrc", "~/.config/gh", "~/.docker/config.json",
                                  "~/.kube"], "under the sandbox: paths hidden from commands (an empty folder or "
                                 "file in their place), beside Bob's own secrets, which always are: its key "
                                 "file, its config folder (skills excepted), its state folder, the checkpoint store")
    limits: ToolLimits = section(ToolLimits, "what sandboxed commands may use (core dumps are always off)")
    plan: bool = key(False, "the update_plan tool: the model's plan as an ACP plan the editor shows", full=True)
    askUser: bool = key(False, "the ask_user tool: the model asks the user a question (a form the editor shows, "
                        "elicitation/create; else a choice among its options, or the chat's prompt); with it, a "
                        "rejected call's \"what instead?\" is asked where the editor cannot say it", full=True)
    clientFs: bool = key(False, "read_file, write_file, edit_file through the editor (fs/read_text_file, "
                         "fs/write_text_file) when it offers them; the disk otherwise", full=True)
    clientTerminal: bool = key(False, "bash in the editor's terminal (terminal/create …) when it offers terminals; "
                               "Bob's own process otherwise, or when the editor cannot create one", full=True)
    checkpoints: bool = key(False, "what Bob's own tool calls change recorded (write_file and edit_file exactly, each "
                            "bash command's changes by a look before and after it, in a git repository of Bob's own "
                            "under .bob/checkpoints; needs git): /undo and /redo", full=True)
    checkpointTurns: int = key(20, "the turns of a session /undo can take back (older ones are pruned)", minimum=1,
                               maximum=1000)
    checkpointMaxBytes: int = key(10 * 1024 * 1024, "a file larger than this is not recorded (said in the turn)",
                                  minimum=0, maximum=2 ** 40)
    checkpointStoreLimit: int = key(1024 * 1024 * 1024, "bytes a project's checkpoint store may take; past them "
                                    "the session's oldest undo points are dropped (said in the turn)",
                                    minimum=1024 * 1024, maximum=2 ** 50)
    env: ToolEnv = section(ToolEnv)


class Loop(Section):
    warnAt: int = key(3, "the same call repeated this many times in a row is not run", minimum=2)
    stopAt: int = key(5, "... and at this many the turn ends", minimum=2)


class Limits(Section):
    maxSessions: int = key(1024, "sessions per connection (0: the default; negative: unlimited)")
    sessionOverflow: str = key("refuse", "refuse | evict_oldest", choices=("refuse", "evict_oldest"))
    maxModelCalls: int = key(50, "model calls per turn, then stopReason max_turn_requests", minimum=1)


class Skills(Section):
    dirs: list[str] = key([], "more skill folders, searched last (they win)", path=True)


class Acp(Section):
    sessionHistory: bool = key(False, "session/list, resume, close, delete, titles (needs sessions.enabled)",
                               full=True)
    configOptions: bool = key(False, "the model, approval-mode and reasoning selectors", full=True)
    replayStatus: str = key("completed", "completed: a replayed call with a result is completed | recorded: as "
                            "it was live", choices=("completed", "recorded"), full="recorded")
    auth: bool = key(False, "sign-in methods at initialize; session methods -32000 while no model is usable",
                     full=True)
    embeddedContext: bool = key(False, "resource blocks in prompts given to the model", full=True)
    images: bool = key(False, "image blocks given to the model (PNG, JPEG, GIF, WebP, at most 2 MiB)", full=True)
    cancelRequest: bool = key(False, "$/cancel_request both ways: the client's cancels a prompt or a queued "
                              "request (-32800); Bob's withdraws a question it stopped waiting for", full=True)
    additionalDirectories: bool = key(False, "sessions over more folders than one (session/new, load, resume, "
                                      "list)", full=True)
    fork: bool = key(False, "session/fork (an unstable method editors offer as Fork Thread): a new session with the "
                     "conversation so far, its own id and file (needs sessions.enabled)", full=True)
    steering: bool = key(False, "_session/steering (as codex-acp and claude-agent-acp have it): what the user adds "
                         "while a turn runs joins it at its next model call; without it, a second prompt waits for "
                         "the turn", full=True)
    clientTimeout: float = key(60, "seconds Bob waits for the editor to answer one of its requests (fs/*, "
                               "terminal/*; a command's own run has tools.bash.timeout); past it the tool call fails",
                               minimum=0.001, maximum=86400)


class Permissions(Section):
    mode: str = key("ask", "a new session's approval mode: ask | sandboxed (needs tools.sandbox) | allow-edits | "
                    "allow-all", choices=("ask", "sandboxed", "allow-edits", "allow-all"))
    allowAlways: str = key("tool", "tool: allow_always covers the tool's name | command: the exact command or path",
                           choices=("tool", "command"), full="command")
    newForgetsGrants: bool = key(False, "/new forgets the session's \"always\" answers too (and says so)", full=True)
    projectRules: bool = key(False, "the question also offers \"Always in this project\" and \"Never in this "
                             "project\", kept in Bob's state folder (never in the project) for later sessions; "
                             "bob-acp rules lists and changes them", full=True)


class Mcp(Section):
    enabled: bool = key(False, "the editor's MCP servers (false: counted in the log, ignored)", full=True)
    timeout: float = key(30, "seconds per MCP call", minimum=0.001, maximum=86400)


class Chat(Section):
    mcpServers: list[dict[str, Any]] = key([], "MCP servers bob-acp chat gives its sessions, in ACP's shape "
                                           "({name, command, args, env}, or {type: http or sse, name, url, headers}; needs "
                                           "mcp.enabled)")


class Log(Section):
    level: str = key("info", "debug | info | warning | error", choices=("debug", "info", "warning", "error"))
    format: str = key("console", "console | json", choices=("console", "json"))
    file: str | None = key(None, "the log's file; null: stderr", path=True)


class Config(Section):
    """The effective configuration. `source`: the file it came from, or None; `entries`: the
    models a session can use, the default first."""

    profile: str = key("default", "default: Bob's minimal behaviour (scripts rely on it) | full: every key marked "
                       "below on (editors and bob-acp chat start Bob with it); a key set in the file wins over the "
                       "profile, --profile wins over this", choices=("default", "full"))
    model: ModelSettings = section(ModelSettings, "the default model")
    models: list[dict[str, Any]] = key([], "further models for the picker: each a mapping of the model keys with an "
                                       "id; with models: and no model:, the first entry is the default")
    context: Context = section(Context)
    sessions: Sessions = section(Sessions)
    tools: Tools = section(Tools)
    loop: Loop = section(Loop)
    limits: Limits = section(Limits)
    skills: Skills = section(Skills)
    acp: Acp = section(Acp)
    permissions: Permissions = section(Permissions)
    mcp: Mcp = section(Mcp)
    chat: Chat = section(Chat)
    log: Log = section(Log)
    source: str | None
    entries: list[ModelEntry]

    def __init__(self, values: dict[str, Any], source: str | None, entries: list[ModelEntry]):
        super().__init__(values)
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "entries", entries)


# ---- reading the declarations ----------------------------------------------------------------------

def declared(cls: type) -> dict[str, Any]:
    """The keys (Key) and sections (SectionRef) of a section class, in declaration order, with
    each key's kind read from its annotation."""
    found: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        for name, annotation in klass.__dict__.get("__annotations__", {}).items():
            spec = klass.__dict__.get(name)
            if isinstance(spec, Key):
                found[name] = spec._replace(kind=_kind(annotation, spec), nullable=annotation.endswith(" | None"))
            elif isinstance(spec, SectionRef):
                found[name] = spec
    return found


_KINDS = {"str": "str", "int": "int", "float": "number", "bool": "bool", "list[str]": "list[str]",
          "list[dict[str, Any]]": "list[object]", "dict[str, str]": "map[str]", "dict[str, Any]": "object",
          "list[str] | str": "choices"}


def _kind(annotation: str, spec: Key) -> str:
    base = annotation.removesuffix(" | None")
    if spec.choices:
        return "enum"
    if base not in _KINDS:
        raise TypeError(f"config key of type {annotation}: add its kind to config_schema._KINDS")
    return _KINDS[base]

